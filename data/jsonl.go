package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// readJSONL feeds every non-blank line of a .jsonl file to c.
func readJSONL(path string, c *collector) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	// ReadBytes grows its result to any line length, unlike bufio.Scanner whose default
	// 64 KiB token limit would reject long conversations.
	br := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("data: read %s: %w", path, rerr)
		}
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\uFEFF")) // editors on Windows add a BOM
		}
		// Without its line end, a JSON error's byte offset is a column in the line.
		b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(b)) > 0 {
			if err := addJSONLine(c, b, line); err != nil {
				return err
			}
		}
		if rerr != nil { // io.EOF: the last line had no newline, or the file ended
			return nil
		}
	}
}

func addJSONLine(c *collector, b []byte, line int) error {
	// encoding/json would replace each bad byte with U+FFFD and train on that.
	if at := invalidUTF8(b); at >= 0 {
		return c.bad(line, fmt.Errorf("invalid UTF-8 at byte %d (0x%02x): the file must be UTF-8 text", at+1, b[at]))
	}
	var obj jsonRow
	if err := json.Unmarshal(b, &obj); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return c.bad(line, fmt.Errorf("invalid JSON at byte %d: %v", syn.Offset, syn))
		}
		// Valid JSON of the wrong shape (Unmarshal checks syntax before types).
		return c.bad(line, fmt.Errorf("row is %s, want an object", jsonKind(b)))
	}
	if obj == nil { // the line was the literal null
		return c.bad(line, errors.New("row is null, want an object"))
	}
	return c.add(obj, line)
}

// invalidUTF8 returns the offset of the first byte of b that is not part of valid UTF-8,
// or -1.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// jsonRow is one decoded JSON object, its values left raw so that each feature's type
// can be reported precisely.
type jsonRow map[string]json.RawMessage

func (r jsonRow) has(name string) bool {
	v, ok := r[name]
	return ok && jsonKind(v) != "null"
}

func (r jsonRow) str(name string) (string, error) {
	v := r[name]
	if k := jsonKind(v); k != "a string" {
		return "", fmt.Errorf("%q is %s, want a string", name, k)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%q: %v", name, err)
	}
	return s, nil
}

func (r jsonRow) messages(name string) ([]message, error) {
	v := r[name]
	if k := jsonKind(v); k != "an array" {
		return nil, fmt.Errorf("%q is %s, want a list of messages", name, k)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(v, &elems); err != nil {
		return nil, fmt.Errorf("%q: %v", name, err)
	}
	msgs := make([]message, len(elems))
	for i, e := range elems {
		if k := jsonKind(e); k != "an object" {
			return nil, fmt.Errorf("%q[%d] is %s, want an object", name, i, k)
		}
		var obj jsonRow
		if err := json.Unmarshal(e, &obj); err != nil {
			return nil, fmt.Errorf("%q[%d]: %v", name, i, err)
		}
		var err error
		if msgs[i], err = messageFrom(obj); err != nil {
			return nil, fmt.Errorf("%q[%d]: %w", name, i, err)
		}
	}
	return msgs, nil
}

func (r jsonRow) isList(name string) bool { return jsonKind(r[name]) == "an array" }

func (r jsonRow) parts(name string) ([]part, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(r[name], &elems); err != nil {
		return nil, fmt.Errorf("%q: %v", name, err)
	}
	ps := make([]part, len(elems))
	for i, e := range elems {
		if k := jsonKind(e); k != "an object" {
			return nil, fmt.Errorf("%q[%d] is %s, want a part object", name, i, k)
		}
		var obj jsonRow
		if err := json.Unmarshal(e, &obj); err != nil {
			return nil, fmt.Errorf("%q[%d]: %v", name, i, err)
		}
		var err error
		if ps[i], err = partFrom(obj); err != nil {
			return nil, fmt.Errorf("%q[%d]: %w", name, i, err)
		}
	}
	return ps, nil
}

// binary is never true: JSON has no bytes type (images are given by path).
func (r jsonRow) binary(string) ([]byte, bool) { return nil, false }

// jsonKind names the type of a syntactically valid JSON value for error messages.
func jsonKind(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
