package tokenizer

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// segment is one span of a string as a pattern sees it: a match or the text between matches.
// A pattern's segments tile the whole string in order, the way the HF library's
// Pattern::find_matches does.
type segment struct {
	start, end int
	match      bool
}

// pattern finds matches inside a string. Implementations append to dst and return it so
// callers can reuse one buffer.
type pattern interface {
	findMatches(s string, dst []segment) []segment
}

// tileMatches turns a list of match spans into the tiling the library produces: gaps become
// non-match segments, matches (empty ones included) become match segments.
func tileMatches(s string, spans [][2]int, dst []segment) []segment {
	if s == "" {
		return append(dst, segment{0, 0, false})
	}
	prev := 0
	for _, m := range spans {
		if prev != m[0] {
			dst = append(dst, segment{prev, m[0], false})
		}
		dst = append(dst, segment{m[0], m[1], true})
		prev = m[1]
	}
	if prev != len(s) {
		dst = append(dst, segment{prev, len(s), false})
	}
	return dst
}

// literalPattern matches a fixed string. The library compiles it as an escaped regex, whose
// leftmost non-overlapping matches are exactly what strings.Index finds.
type literalPattern struct{ lit string }

func (p literalPattern) findMatches(s string, dst []segment) []segment {
	if s == "" {
		return append(dst, segment{0, 0, false})
	}
	if p.lit == "" {
		return append(dst, segment{0, len(s), false})
	}
	prev, at := 0, 0
	for {
		i := strings.Index(s[at:], p.lit)
		if i < 0 {
			break
		}
		start := at + i
		if prev != start {
			dst = append(dst, segment{prev, start, false})
		}
		dst = append(dst, segment{start, start + len(p.lit), true})
		prev = start + len(p.lit)
		at = prev
	}
	if prev != len(s) {
		dst = append(dst, segment{prev, len(s), false})
	}
	return dst
}

// runePattern matches single characters that satisfy a predicate, like the library's
// closure patterns (char::is_whitespace, char::is_numeric, a Metaspace replacement char).
type runePattern struct{ is func(rune) bool }

func (p runePattern) findMatches(s string, dst []segment) []segment {
	if s == "" {
		return append(dst, segment{0, 0, false})
	}
	last := 0
	for i, r := range s {
		if p.is(r) {
			if last < i {
				dst = append(dst, segment{last, i, false})
			}
			// Encode makes its input valid UTF-8, so RuneLen is the byte width.
			n := utf8.RuneLen(r)
			dst = append(dst, segment{i, i + n, true})
			last = i + n
		}
	}
	if last < len(s) {
		dst = append(dst, segment{last, len(s), false})
	}
	return dst
}

// invertPattern flips match flags, as Split's "invert" does.
type invertPattern struct{ p pattern }

func (p invertPattern) findMatches(s string, dst []segment) []segment {
	n := len(dst)
	dst = p.p.findMatches(s, dst)
	for i := n; i < len(dst); i++ {
		dst[i].match = !dst[i].match
	}
	return dst
}

// goRegexPattern uses Go's RE2 engine: linear time, used whenever the pattern needs no
// backtracking feature. Alternation is leftmost-first as in Oniguruma; the engines differ
// only for empty matches right after a match, which tokenizer patterns do not produce.
type goRegexPattern struct{ re *regexp.Regexp }

func (p goRegexPattern) findMatches(s string, dst []segment) []segment {
	if s == "" {
		return append(dst, segment{0, 0, false})
	}
	locs := p.re.FindAllStringIndex(s, -1)
	spans := make([][2]int, len(locs))
	for i, l := range locs {
		spans[i] = [2]int{l[0], l[1]}
	}
	return tileMatches(s, spans, dst)
}

// regexp2Pattern uses a backtracking engine for patterns with lookaround, atomic groups or
// backreferences (the GPT-style `\s+(?!\S)` is the common case). regexp2 reports rune
// indexes, so they are mapped back to byte offsets.
type regexp2Pattern struct{ re *regexp2.Regexp }

func (p regexp2Pattern) findMatches(s string, dst []segment) []segment {
	if s == "" {
		return append(dst, segment{0, 0, false})
	}
	runes := []rune(s)
	offs := make([]int, 0, len(runes)+1)
	for i := range s {
		offs = append(offs, i)
	}
	offs = append(offs, len(s))
	var spans [][2]int
	m, err := p.re.FindRunesMatchStartingAt(runes, 0)
	for err == nil && m != nil {
		spans = append(spans, [2]int{offs[m.Index], offs[m.Index+m.Length]})
		m, err = p.re.FindNextMatch(m)
	}
	// err can only be a match timeout, and none is configured.
	return tileMatches(s, spans, dst)
}

// compileRegex compiles a tokenizer.json regex. The library runs Oniguruma, whose \s, \w and
// \d are Unicode-aware; Go's are ASCII-only, so those shorthands are first rewritten into
// explicit Unicode classes. Patterns that need backtracking go to regexp2.
func compileRegex(pat string) (pattern, error) {
	tr, goOK := translateShorthands(pat)
	if goOK && !needsBacktracking(pat) {
		if re, err := regexp.Compile(tr); err == nil {
			return goRegexPattern{re}, nil
		}
	}
	re, err := regexp2.Compile(tr, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", pat, err)
	}
	return regexp2Pattern{re}, nil
}

// needsBacktracking reports constructs RE2 cannot run: lookaround, atomic groups,
// backreferences and possessive quantifiers.
func needsBacktracking(pat string) bool {
	for _, c := range []string{"(?=", "(?!", "(?<=", "(?<!", "(?>", `\k<`, "++", "*+", "?+", "}+"} {
		if strings.Contains(pat, c) {
			return true
		}
	}
	for i := 0; i+1 < len(pat); i++ {
		if pat[i] == '\\' {
			if pat[i+1] >= '1' && pat[i+1] <= '9' {
				return true
			}
			i++
		}
	}
	return false
}

// Unicode meanings of the shorthands in Oniguruma: \s is White_Space (TAB..CR, NEL and the Z
// categories), \w is Letter|Mark|Number|Connector_Punctuation, \d is Decimal_Number.
const (
	classSpace = `\t\n\v\f\r\x85\p{Z}`
	classWord  = `\p{L}\p{M}\p{N}\p{Pc}`
)

// translateShorthands rewrites \s \S \w \W \d \D into Unicode classes. The second result is
// false when a negated shorthand sits inside a bracket class, which Go's syntax cannot
// express; such patterns keep their native meaning under regexp2.
func translateShorthands(pat string) (string, bool) {
	var b strings.Builder
	goOK := true
	inClass := false
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		switch {
		case c == '\\' && i+1 < len(pat):
			e := pat[i+1]
			i++
			switch e {
			case 's':
				b.WriteString(wrap(classSpace, inClass, false))
			case 'w':
				b.WriteString(wrap(classWord, inClass, false))
			case 'd':
				b.WriteString(`\p{Nd}`)
			case 'D':
				b.WriteString(`\P{Nd}`)
			case 'S', 'W':
				if inClass {
					goOK = false
					b.WriteByte('\\')
					b.WriteByte(e)
				} else if e == 'S' {
					b.WriteString(wrap(classSpace, false, true))
				} else {
					b.WriteString(wrap(classWord, false, true))
				}
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			if i+1 < len(pat) && pat[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			// A ']' right after '[' or '[^' is a literal.
			if i+1 < len(pat) && pat[i+1] == ']' {
				b.WriteString(`\]`)
				i++
			}
		case c == '[' && inClass && i+1 < len(pat) && pat[i+1] == ':':
			end := strings.Index(pat[i:], ":]")
			if end < 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteString(pat[i : i+end+2])
			i += end + 1
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), goOK
}

func wrap(class string, inClass, negate bool) string {
	if inClass {
		return class
	}
	if negate {
		return "[^" + class + "]"
	}
	return "[" + class + "]"
}
