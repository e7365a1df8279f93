package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	content    string
	id         int32
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
	special    bool
	// normContent is the content after the tokenizer's normalizer, for normalized tokens;
	// that is the form matched in normalized text and the form Decode shows.
	normContent string
}

// trie finds added tokens with leftmost-longest semantics, like the library's Aho-Corasick
// automaton in LeftmostLongest mode: the earliest start wins, then the longest token there.
type trie struct {
	root  [256]int32 // first-byte transitions, 0 = none
	nodes []trieNode
}

type trieNode struct {
	next  map[byte]int32
	token int32 // index into the added token list, -1 when no token ends here
}

func newTrie() *trie {
	return &trie{nodes: []trieNode{{token: -1}}}
}

func (t *trie) insert(s string, token int32) {
	if s == "" {
		return
	}
	n := t.root[s[0]]
	if n == 0 {
		n = int32(len(t.nodes))
		t.nodes = append(t.nodes, trieNode{token: -1})
		t.root[s[0]] = n
	}
	for i := 1; i < len(s); i++ {
		nd := &t.nodes[n]
		nx, ok := nd.next[s[i]]
		if !ok {
			nx = int32(len(t.nodes))
			if nd.next == nil {
				nd.next = make(map[byte]int32)
			}
			nd.next[s[i]] = nx
			t.nodes = append(t.nodes, trieNode{token: -1})
		}
		n = nx
	}
	t.nodes[n].token = token
}

// longestAt returns the token index and length of the longest token starting at s[i:].
func (t *trie) longestAt(s string, i int) (int32, int) {
	n := t.root[s[i]]
	if n == 0 {
		return -1, 0
	}
	best, bestLen := t.nodes[n].token, 1
	if best < 0 {
		bestLen = 0
	}
	for j := i + 1; j < len(s); j++ {
		nx, ok := t.nodes[n].next[s[j]]
		if !ok {
			break
		}
		n = nx
		if tok := t.nodes[n].token; tok >= 0 {
			best, bestLen = tok, j+1-i
		}
	}
	return best, bestLen
}

// addedVocab holds the added tokens and the two matchers the library keeps: one for tokens
// matched in raw text (normalized: false) and one for tokens matched after normalization.
type addedVocab struct {
	tokens    []addedToken
	byContent map[string]int32 // content -> id
	byID      map[int32]int    // id -> index into tokens
	raw       *trie
	norm      *trie
}

// splitOut cuts the matches of t out of every unresolved piece, honouring single_word,
// lstrip and rstrip exactly as AddedVocabulary::find_matches does.
func (v *addedVocab) splitOut(pieces []piece, t *trie) []piece {
	out := make([]piece, 0, len(pieces))
	for _, pc := range pieces {
		if pc.id >= 0 || t == nil {
			out = append(out, pc)
			continue
		}
		s := pc.text
		emit := func(a, b int, id int32) {
			if a < b {
				out = append(out, piece{text: s[a:b], id: id, atStart: pc.atStart && a == 0})
			}
		}
		startOffset := 0
		for i := 0; i < len(s); {
			k, n := t.longestAt(s, i)
			if k < 0 {
				i++
				continue
			}
			tok := &v.tokens[k]
			start, stop := i, i+n
			i = stop // a discarded match is not searched again, as in the automaton
			if tok.singleWord {
				startSpace := start == 0 || !endsWithWord(s[:start])
				stopSpace := stop == len(s) || !startsWithWord(s[stop:])
				if !startSpace || !stopSpace {
					continue
				}
			}
			if tok.lstrip {
				start = max(trailingSpaceStart(s[:start]), startOffset)
			}
			if tok.rstrip {
				stop += leadingSpaceLen(s[stop:])
				i = stop
			}
			emit(startOffset, start, -1)
			emit(start, stop, tok.id)
			startOffset = stop
		}
		emit(startOffset, len(s), -1)
	}
	return out
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isRustWord(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isRustWord(r)
}

// trailingSpaceStart is where the run of whitespace ending s begins (len(s) if none).
func trailingSpaceStart(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= n
	}
	return i
}

func leadingSpaceLen(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}
