package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// byteToRune is GPT-2's reversible byte→printable-character table: printable Latin-1 bytes
// map to themselves, the other 68 bytes to U+0100 upwards in byte order. runeToByte inverts
// it. Both are filled once and only read afterwards.
var byteToRune, runeToByte = byteLevelTables()

func byteLevelTables() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	keep := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		if keep(b) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
	}
	r2b := make(map[rune]byte, 256)
	for b, r := range b2r {
		r2b[r] = byte(b)
	}
	return b2r, r2b
}

func byteLevelEncode(s string) string {
	var b strings.Builder
	b.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToRune[s[i]])
	}
	return b.String()
}

// gpt2Pattern is the ByteLevel pre-tokenizer's fixed regex
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// written out by hand: the lookahead would otherwise force the slow backtracking engine on
// every ByteLevel tokenizer. Every character is a letter, number, space or "other", so some
// alternative always matches and the matches tile the string.
type gpt2Pattern struct{}

func (gpt2Pattern) findMatches(s string, dst []segment) []segment {
	if s == "" {
		return append(dst, segment{0, 0, false})
	}
	for i := 0; i < len(s); {
		n := gpt2MatchAt(s, i)
		dst = append(dst, segment{i, i + n, true})
		i += n
	}
	return dst
}

type charClass int

const (
	classLetter charClass = iota
	classNumber
	classSpaceChar
	classOther
)

func classify(r rune) charClass {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r):
		return classSpaceChar
	}
	return classOther
}

// runOf returns the end of the run of characters of class c starting at i.
func runOf(s string, i int, c charClass) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if classify(r) != c {
			break
		}
		i += n
	}
	return i
}

// gpt2MatchAt returns the length of the match the GPT-2 regex finds at byte i.
func gpt2MatchAt(s string, i int) int {
	if s[i] == '\'' {
		rest := s[i+1:]
		for _, suf := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
			if strings.HasPrefix(rest, suf) {
				return 1 + len(suf)
			}
		}
	}
	// ` ?X+` for X in letter, number, other: try with the optional space first.
	start := i
	if s[i] == ' ' && i+1 < len(s) {
		r, _ := utf8.DecodeRuneInString(s[i+1:])
		if c := classify(r); c != classSpaceChar {
			return runOf(s, i+1, c) - start
		}
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	if c := classify(r); c != classSpaceChar {
		return runOf(s, i, c) - start
	}
	// Whitespace: `\s+(?!\S)` keeps the last space for the next word unless the run ends
	// the string; a single space before a word falls through to `\s+`.
	end := runOf(s, i, classSpaceChar)
	if end == len(s) {
		return end - i
	}
	_, last := utf8.DecodeLastRuneInString(s[:end])
	if end-last > i {
		return end - last - i
	}
	return end - i
}
