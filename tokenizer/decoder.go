package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// decoder turns the token strings of a Decode call into new strings; the chain's output is
// concatenated at the end (the library's decode_chain followed by join("")).
type decoder interface {
	decodeChain(tokens []string) []string
}

type decSequence []decoder

func (s decSequence) decodeChain(tokens []string) []string {
	for _, d := range s {
		tokens = d.decodeChain(tokens)
	}
	return tokens
}

// decReplace applies a Replace pattern to each token on its own.
type decReplace struct{ r normReplace }

func (d decReplace) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		p := piece{text: t}
		d.r.normalize(&p)
		tokens[i] = p.text
	}
	return tokens
}

// decByteFallback turns runs of <0xNN> tokens back into bytes. A run that is not valid UTF-8
// becomes one U+FFFD per byte token, as in the library.
type decByteFallback struct{}

func parseByteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	h := t[3:5]
	// Rust's u8::from_str_radix accepts a leading '+', so "<0x+A>" is byte 10.
	if h[0] == '+' {
		v, ok := hexDigit(h[1])
		return v, ok
	}
	hi, ok1 := hexDigit(h[0])
	lo, ok2 := hexDigit(h[1])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func (decByteFallback) decodeChain(tokens []string) []string {
	out := make([]string, 0, len(tokens))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range tokens {
		if b, ok := parseByteToken(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

type decFuse struct{}

func (decFuse) decodeChain(tokens []string) []string {
	return []string{strings.Join(tokens, "")}
}

// decStrip removes up to start leading and stop trailing copies of one character per token.
type decStrip struct {
	content     rune
	start, stop int
}

func (d decStrip) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		rs := []rune(t)
		lo := 0
		for lo < d.start && lo < len(rs) && rs[lo] == d.content {
			lo++
		}
		hi := len(rs)
		for k := 0; k < d.stop && hi > lo && rs[hi-1] == d.content; k++ {
			hi--
		}
		tokens[i] = string(rs[lo:hi])
	}
	return tokens
}

// decMetaspace turns the replacement character back into spaces; in the first token it is
// dropped instead unless the prepend scheme is "never", undoing the prefix the
// pre-tokenizer added.
type decMetaspace struct {
	replacement rune
	scheme      prependScheme
}

func (d decMetaspace) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		if !strings.ContainsRune(t, d.replacement) {
			continue
		}
		var b strings.Builder
		for _, r := range t {
			switch {
			case r != d.replacement:
				b.WriteRune(r)
			case i == 0 && d.scheme != prependNever:
			default:
				b.WriteByte(' ')
			}
		}
		tokens[i] = b.String()
	}
	return tokens
}

// decByteLevel maps GPT-2 alphabet characters back to bytes over all tokens at once, so a
// character split across tokens survives; a token holding a character outside the alphabet
// is taken as its raw UTF-8 bytes.
type decByteLevel struct{}

func (decByteLevel) decodeChain(tokens []string) []string {
	var buf []byte
	for _, t := range tokens {
		start := len(buf)
		ok := true
		for _, r := range t {
			b, in := runeToByte[r]
			if !in {
				ok = false
				break
			}
			buf = append(buf, b)
		}
		if !ok {
			buf = append(buf[:start], t...)
		}
	}
	return []string{lossyUTF8(buf)}
}

// decBPE replaces the end-of-word suffix with a space, and with nothing in the last token.
type decBPE struct{ suffix string }

func (d decBPE) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		rep := " "
		if i == len(tokens)-1 {
			rep = ""
		}
		if d.suffix != "" {
			tokens[i] = strings.ReplaceAll(t, d.suffix, rep)
		}
	}
	return tokens
}

// lossyUTF8 converts bytes to a string like Rust's String::from_utf8_lossy: each maximal
// prefix of an ill-formed sequence becomes one U+FFFD (Go's ToValidUTF8 would merge whole runs).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			sb.Write(b[i : i+n])
			i += n
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += invalidPrefixLen(b[i:])
	}
	return sb.String()
}

// invalidPrefixLen is the length of the maximal prefix of a well-formed UTF-8 sequence at the
// start of b, at least 1 (Unicode's "maximal subpart" rule, which Rust follows).
func invalidPrefixLen(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if k == 0 {
			if x < lo || x > hi {
				break
			}
		} else if x < 0x80 || x > 0xBF {
			break
		}
		n++
	}
	return n
}
