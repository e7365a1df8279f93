package tokenizer

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites one piece of text before pre-tokenization.
type normalizer interface {
	normalize(p *piece)
}

type normSequence []normalizer

func (s normSequence) normalize(p *piece) {
	for _, n := range s {
		n.normalize(p)
	}
}

// normReplace replaces every match of a pattern with content.
type normReplace struct {
	pat     pattern
	lit     string // set when the pattern is a plain string: then strings.ReplaceAll does it
	content string
}

func (r normReplace) normalize(p *piece) {
	if r.pat == nil {
		if r.lit != "" {
			p.text = strings.ReplaceAll(p.text, r.lit, r.content)
		}
		return
	}
	p.text = replaceMatches(r.pat, p.text, r.content)
}

func replaceMatches(pat pattern, s, content string) string {
	var b strings.Builder
	for _, seg := range pat.findMatches(s, nil) {
		if seg.match {
			b.WriteString(content)
		} else {
			b.WriteString(s[seg.start:seg.end])
		}
	}
	return b.String()
}

// normPrepend prefixes non-empty text.
type normPrepend struct{ prefix string }

func (n normPrepend) normalize(p *piece) {
	if p.text != "" {
		p.text = n.prefix + p.text
	}
}

type normUnicode struct{ form norm.Form }

func (n normUnicode) normalize(p *piece) { p.text = n.form.String(p.text) }

// normLowercase maps each character to its full lowercase form like Rust's
// char::to_lowercase. Go's simple mapping differs only for U+0130, whose full lowercase is
// "i" + U+0307.
type normLowercase struct{}

func (normLowercase) normalize(p *piece) {
	if !strings.ContainsRune(p.text, '\u0130') {
		p.text = strings.Map(unicode.ToLower, p.text)
		return
	}
	var b strings.Builder
	for _, r := range p.text {
		if r == '\u0130' {
			b.WriteString("i\u0307")
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	p.text = b.String()
}

// normStrip removes leading and/or trailing whitespace (Rust's char::is_whitespace, which is
// the White_Space property that unicode.IsSpace implements).
type normStrip struct{ left, right bool }

func (n normStrip) normalize(p *piece) {
	if n.left {
		t := strings.TrimLeftFunc(p.text, unicode.IsSpace)
		if len(t) != len(p.text) {
			// The first kept character no longer sits at original offset 0.
			p.atStart = false
		}
		p.text = t
	}
	if n.right {
		p.text = strings.TrimRightFunc(p.text, unicode.IsSpace)
	}
}

// normByteLevel maps every byte to the GPT-2 printable alphabet.
type normByteLevel struct{}

func (normByteLevel) normalize(p *piece) { p.text = byteLevelEncode(p.text) }
