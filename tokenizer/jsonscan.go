package tokenizer

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a small JSON reader for the two big members of tokenizer.json, model.vocab and
// model.merges (a Gemma file has 262k tokens and ~500k merges). encoding/json spends most
// of a load on reflection for them; everything else still goes through encoding/json.
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrSyntax, s.pos, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.pos >= len(s.data) {
			return s.errorf("unexpected end of input, want %q", c)
		}
		return s.errorf("found %q, want %q", s.data[s.pos], c)
	}
	s.pos++
	return nil
}

// strBytes reads a JSON string like str, returning a view into the input when the string
// has no escapes and is valid UTF-8, so callers that only look it up need not allocate.
func (s *scanner) strBytes() ([]byte, error) {
	if s.peek() == '"' {
		for i := s.pos + 1; i < len(s.data); i++ {
			c := s.data[i]
			if c == '"' {
				raw := s.data[s.pos+1 : i]
				if utf8.Valid(raw) {
					s.pos = i + 1
					return raw, nil
				}
				break
			}
			if c == '\\' || c < 0x20 {
				break
			}
		}
	}
	v, err := s.str()
	return []byte(v), err
}

// str reads a JSON string. Invalid UTF-8 inside it becomes U+FFFD, as encoding/json does.
func (s *scanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.pos
	for i := start; i < len(s.data); i++ {
		c := s.data[i]
		if c == '"' {
			s.pos = i + 1
			raw := s.data[start:i]
			if !utf8.Valid(raw) {
				return validUTF8(string(raw)), nil
			}
			return string(raw), nil
		}
		if c == '\\' {
			return s.escapedStr(start)
		}
		if c < 0x20 {
			s.pos = i
			return "", s.errorf("control character %#x in string", c)
		}
	}
	s.pos = len(s.data)
	return "", s.errorf("unterminated string")
}

func (s *scanner) escapedStr(start int) (string, error) {
	buf := make([]byte, 0, 32)
	i := start
	for i < len(s.data) {
		c := s.data[i]
		switch {
		case c == '"':
			s.pos = i + 1
			if !utf8.Valid(buf) {
				return validUTF8(string(buf)), nil
			}
			return string(buf), nil
		case c < 0x20:
			s.pos = i
			return "", s.errorf("control character %#x in string", c)
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		if i+1 >= len(s.data) {
			break
		}
		e := s.data[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(s.data, i)
			if !ok {
				s.pos = i
				return "", s.errorf("bad \\u escape")
			}
			i += 4
			if utf16.IsSurrogate(r) {
				// A valid pair makes one rune; a lone surrogate becomes U+FFFD.
				if i+6 <= len(s.data) && s.data[i] == '\\' && s.data[i+1] == 'u' {
					if r2, ok := hex4(s.data, i+2); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							i += 6
							buf = utf8.AppendRune(buf, d)
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			buf = utf8.AppendRune(buf, r)
		default:
			s.pos = i - 1
			return "", s.errorf("bad escape \\%c", e)
		}
	}
	s.pos = len(s.data)
	return "", s.errorf("unterminated string")
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		v, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// integer reads a JSON number that must be an integer.
func (s *scanner) integer() (int64, error) {
	s.ws()
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.pos++
			continue
		}
		break
	}
	v, err := strconv.ParseInt(string(s.data[start:s.pos]), 10, 64)
	if err != nil {
		s.pos = start
		return 0, s.errorf("want an integer id, found %q", s.data[start:min(s.pos+16, len(s.data))])
	}
	return v, nil
}

// skip steps over one value of any kind, checking its structure.
func (s *scanner) skip() error {
	switch c := s.peek(); c {
	case '"':
		return s.skipStr()
	case '{':
		return s.object(func(string) error { return s.skip() })
	case '[':
		return s.array(s.skip)
	case 0:
		return s.errorf("unexpected end of input")
	default:
		start := s.pos
		for s.pos < len(s.data) {
			c := s.data[s.pos]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			s.pos++
		}
		lit := string(s.data[start:s.pos])
		switch lit {
		case "true", "false", "null":
			return nil
		}
		if _, err := strconv.ParseFloat(lit, 64); err != nil || lit == "" {
			s.pos = start
			return s.errorf("invalid value %q", lit)
		}
		return nil
	}
}

// skipStr steps over a string without building it, checking its escapes.
func (s *scanner) skipStr() error {
	i := s.pos + 1
	for i < len(s.data) {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			return nil
		case c < 0x20:
			s.pos = i
			return s.errorf("control character %#x in string", c)
		case c == '\\':
			if i+1 >= len(s.data) {
				s.pos = len(s.data)
				return s.errorf("unterminated string")
			}
			switch s.data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(s.data, i+2); !ok {
					s.pos = i
					return s.errorf("bad \\u escape")
				}
				i += 6
			default:
				s.pos = i
				return s.errorf("bad escape \\%c", s.data[i+1])
			}
		default:
			i++
		}
	}
	s.pos = len(s.data)
	return s.errorf("unterminated string")
}

// raw steps over one value and returns its bytes.
func (s *scanner) raw() ([]byte, error) {
	s.ws()
	start := s.pos
	if err := s.skip(); err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

// object calls member for each key; member must consume the value.
func (s *scanner) object(member func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		k, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := member(k); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		case 0:
			return s.errorf("unexpected end of input in object")
		default:
			return s.errorf("want ',' or '}' in object")
		}
	}
}

// array calls elem for each element; elem must consume it.
func (s *scanner) array(elem func() error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		case 0:
			return s.errorf("unexpected end of input in array")
		default:
			return s.errorf("want ',' or ']' in array")
		}
	}
}

// scanVocab reads {"token": id, ...}.
func (s *scanner) scanVocab(sizeHint int) (map[string]int32, error) {
	vocab := make(map[string]int32, sizeHint)
	err := s.object(func(tok string) error {
		at := s.pos
		id, err := s.integer()
		if err != nil {
			return err
		}
		if id < 0 || id > maxID {
			s.pos = at
			return fmt.Errorf("%w: vocab token %q has id %d outside [0, %d]", ErrBadModel, tok, id, maxID)
		}
		vocab[tok] = int32(id)
		return nil
	})
	return vocab, err
}

// scanMerges reads the legacy ["a b", ...] form or the [["a", "b"], ...] form and hands
// each merge to add with its rank. The slices are only valid during the call.
func (s *scanner) scanMerges(add func(rank int, a, b []byte) error) error {
	rank, n := 0, 0
	return s.array(func() error {
		defer func() { n++ }()
		switch s.peek() {
		case '"':
			l, err := s.strBytes()
			if err != nil {
				return err
			}
			if bytes.HasPrefix(l, []byte("#version")) {
				return nil
			}
			a, b, ok := cutSpace(l)
			if !ok {
				return fmt.Errorf("%w: model.merges[%d] %q is not two tokens separated by one space", ErrSyntax, n, l)
			}
			rank++
			return add(rank-1, a, b)
		case '[':
			var p [2][]byte
			k := 0
			err := s.array(func() error {
				v, err := s.strBytes()
				if err != nil {
					return err
				}
				if k < 2 {
					p[k] = v
				}
				k++
				return nil
			})
			if err != nil {
				return err
			}
			if k != 2 {
				return fmt.Errorf("%w: model.merges[%d] has %d parts, want 2", ErrSyntax, n, k)
			}
			rank++
			return add(rank-1, p[0], p[1])
		}
		return s.errorf("model.merges[%d] is neither a string nor a pair", n)
	})
}

// cutSpace splits "a b" at its only space.
func cutSpace(l []byte) ([]byte, []byte, bool) {
	i := -1
	for k := 0; k < len(l); k++ {
		if l[k] == ' ' {
			if i >= 0 {
				return nil, nil, false
			}
			i = k
		}
	}
	if i < 0 {
		return nil, nil, false
	}
	return l[:i], l[i+1:], true
}
