package tokenizer

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

// Errors returned by Load and Parse, wrapped with the detail of what was wrong and where.
var (
	// ErrSyntax: the file is not JSON of the tokenizer.json shape.
	ErrSyntax = errors.New("tokenizer: malformed tokenizer.json")
	// ErrUnsupported: a component type or option this package does not implement.
	ErrUnsupported = errors.New("tokenizer: unsupported component")
	// ErrBadModel: the model is inconsistent (a merge or the unk token names a missing token,
	// two tokens share an id, ...).
	ErrBadModel = errors.New("tokenizer: invalid model")
)

// Tokenizer encodes and decodes text with a tokenizer.json. It is safe for concurrent use.
type Tokenizer struct {
	model   *bpeModel
	norm    normalizer   // nil: none
	pre     preTokenizer // nil: none
	dec     decoder      // nil: tokens joined with spaces, as the library does
	added   addedVocab
	idToTok []string // model vocab and added tokens, by id; "" for ids nobody uses
	// special marks ids whose token string is a special added token's; Decode drops them
	// when asked to skip special tokens.
	special map[int32]bool
}

// Load reads and parses a tokenizer.json file.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// VocabSize is one past the largest id in use, i.e. the number of embedding rows a model
// needs for this tokenizer.
func (t *Tokenizer) VocabSize() int { return len(t.idToTok) }

// TokenID returns the id of a token string: an added token's content first, then the model
// vocabulary.
func (t *Tokenizer) TokenID(tok string) (int32, bool) {
	if id, ok := t.added.byContent[tok]; ok {
		return id, true
	}
	id, ok := t.model.vocab[tok]
	return id, ok
}

// Token returns the token string of an id, or "" for an id nobody uses.
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.idToTok) {
		return ""
	}
	return t.idToTok[id]
}

// IsSpecial reports whether id is a special added token (one Decode skips on request).
func (t *Tokenizer) IsSpecial(id int32) bool { return t.special[id] }

// Encode returns the ids of text: no post-processor template runs and no BOS is added.
// Invalid UTF-8 bytes are read as U+FFFD first, the way a Go string converts to runes.
func (t *Tokenizer) Encode(text string) []int32 {
	if !utf8.ValidString(text) {
		text = validUTF8(text)
	}
	if text == "" {
		return []int32{}
	}
	pieces := []piece{{text: text, id: -1, atStart: true}}
	pieces = t.added.splitOut(pieces, t.added.raw)
	if t.norm != nil {
		for i := range pieces {
			if pieces[i].id < 0 {
				t.norm.normalize(&pieces[i])
			}
		}
	}
	pieces = t.added.splitOut(pieces, t.added.norm)
	sc := &bpeScratch{}
	if t.pre != nil {
		pieces = t.pre.preTokenize(pieces, &sc.segs)
	}
	ids := make([]int32, 0, len(text)/3+1)
	for _, p := range pieces {
		if p.id >= 0 {
			ids = append(ids, p.id)
			continue
		}
		ids = t.model.encodeWord(p.text, ids, sc)
	}
	return ids
}

// validUTF8 replaces every invalid byte with U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError for an invalid byte, with n == 1
		i += n
	}
	return b.String()
}

// Decode turns ids back into text through the decoder. Unknown ids are skipped, and so are
// special tokens when skipSpecial is set.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.idToTok) {
			continue
		}
		s := t.idToTok[id]
		if s == "" && !t.used(id) {
			continue
		}
		if skipSpecial && t.special[id] {
			continue
		}
		toks = append(toks, s)
	}
	if t.dec == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(t.dec.decodeChain(toks), "")
}

// used tells an id whose token is the empty string apart from a hole in the id space.
func (t *Tokenizer) used(id int32) bool {
	if _, ok := t.added.byID[id]; ok {
		return true
	}
	if v, ok := t.model.vocab[""]; ok && v == id {
		return true
	}
	return false
}
