package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// preTokenizer splits unresolved pieces into the words the model encodes one by one.
type preTokenizer interface {
	preTokenize(pieces []piece, buf *[]segment) []piece
}

type preSequence []preTokenizer

func (s preSequence) preTokenize(pieces []piece, buf *[]segment) []piece {
	for _, p := range s {
		pieces = p.preTokenize(pieces, buf)
	}
	return pieces
}

// preSplit is the Split pre-tokenizer: a string or regex pattern, a delimiter behavior, and
// optionally the inverted match flags.
type preSplit struct {
	pat pattern
	b   behavior
}

func (s preSplit) preTokenize(pieces []piece, buf *[]segment) []piece {
	return splitPieces(pieces, s.pat, s.b, buf)
}

type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// preMetaspace replaces spaces with the replacement character (▁ by default), prefixes it
// according to the scheme, and optionally splits before each replacement character.
type preMetaspace struct {
	replacement rune
	scheme      prependScheme
	split       bool
}

func (m preMetaspace) preTokenize(pieces []piece, buf *[]segment) []piece {
	rep := string(m.replacement)
	for i := range pieces {
		p := &pieces[i]
		if p.id >= 0 {
			continue
		}
		p.text = strings.ReplaceAll(p.text, " ", rep)
		switch m.scheme {
		case prependAlways:
			if !strings.HasPrefix(p.text, rep) {
				p.text = rep + p.text
			}
		case prependFirst:
			if !strings.HasPrefix(p.text, rep) && p.atStart {
				p.text = rep + p.text
			}
		}
	}
	if !m.split {
		return pieces
	}
	r := m.replacement
	return splitPieces(pieces, runePattern{func(c rune) bool { return c == r }}, mergedWithNext, buf)
}

// preByteLevel optionally prefixes a space, splits with the GPT-2 regex, then maps every byte
// to the GPT-2 alphabet.
type preByteLevel struct {
	addPrefixSpace bool
	useRegex       bool
}

func (b preByteLevel) preTokenize(pieces []piece, buf *[]segment) []piece {
	for i := range pieces {
		p := &pieces[i]
		if p.id < 0 && b.addPrefixSpace && !strings.HasPrefix(p.text, " ") {
			p.text = " " + p.text
		}
	}
	if b.useRegex {
		pieces = splitPieces(pieces, gpt2Pattern{}, isolated, buf)
	}
	for i := range pieces {
		if pieces[i].id < 0 {
			pieces[i].text = byteLevelEncode(pieces[i].text)
		}
	}
	return pieces
}

// preWhitespace keeps runs of word characters and runs of other non-space characters
// (the library's `\w+|[^\w\s]+`, run with Rust's Unicode \w), dropping whitespace.
type preWhitespace struct{}

// isRustWord is Rust regex's Unicode \w: Alphabetic, marks, decimal digits, connector
// punctuation and the two joiners.
func isRustWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) ||
		r == 0x200C || r == 0x200D
}

type whitespaceRuns struct{}

func (whitespaceRuns) findMatches(s string, dst []segment) []segment {
	if s == "" {
		return append(dst, segment{0, 0, false})
	}
	kind := func(r rune) int {
		switch {
		case isRustWord(r):
			return 0
		case unicode.IsSpace(r):
			return 1
		}
		return 2
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		k := kind(r)
		j := i + n
		for j < len(s) {
			r2, n2 := utf8.DecodeRuneInString(s[j:])
			if kind(r2) != k {
				break
			}
			j += n2
		}
		// Word and symbol runs are the regex's matches; whitespace runs sit between them.
		dst = append(dst, segment{i, j, k != 1})
		i = j
	}
	return dst
}

func (preWhitespace) preTokenize(pieces []piece, buf *[]segment) []piece {
	return splitPieces(pieces, invertPattern{whitespaceRuns{}}, removed, buf)
}

// preWhitespaceSplit splits on whitespace characters and drops them.
type preWhitespaceSplit struct{}

func (preWhitespaceSplit) preTokenize(pieces []piece, buf *[]segment) []piece {
	return splitPieces(pieces, runePattern{unicode.IsSpace}, removed, buf)
}

// preDigits isolates digits, each on its own or in runs.
type preDigits struct{ individual bool }

func (d preDigits) preTokenize(pieces []piece, buf *[]segment) []piece {
	b := contiguous
	if d.individual {
		b = isolated
	}
	return splitPieces(pieces, runePattern{unicode.IsNumber}, b, buf)
}
