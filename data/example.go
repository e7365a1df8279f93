package data

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/imageproc"
)

// Example is one training example before tokenization.
type Example struct {
	// Index is the example's position in its split (0-based, after skipped rows are
	// dropped); the trainer derives per-example seeds from it.
	Index int
	// Line locates the row in its file, counted from 1: the line of a .jsonl file or the
	// row of a .parquet file.
	Line int
	// Prompt is the conversation before the target; nil for text rows.
	Prompt []chat.Message
	// Completion is the target text; never empty.
	Completion string
	// Images are the prompt's images in the order of their <|image|> placeholders in
	// the rendered prompt; nil for text-only rows.
	Images []*imageproc.Source
}

// Options select feature names and bad-row handling. The zero value uses the default
// names prompt, completion, text and messages, and fails on the first bad row.
type Options struct {
	PromptFeature     string // default "prompt"
	CompletionFeature string // default "completion"
	TextFeature       string // default "text"
	ChatFeature       string // default "messages"
	// SkipBadRows skips bad rows (and examples whose target encodes to nothing) instead
	// of failing, counting them in Stats.
	SkipBadRows bool
}

// features are the resolved column names of Options.
type features struct {
	prompt, completion, text, chat string
}

func (o Options) features() (features, error) {
	f := features{
		prompt:     cmp.Or(o.PromptFeature, "prompt"),
		completion: cmp.Or(o.CompletionFeature, "completion"),
		text:       cmp.Or(o.TextFeature, "text"),
		chat:       cmp.Or(o.ChatFeature, "messages"),
	}
	// Two formats reading the same column would make format detection meaningless.
	names := []struct{ key, val string }{
		{"prompt_feature", f.prompt},
		{"completion_feature", f.completion},
		{"text_feature", f.text},
		{"chat_feature", f.chat},
	}
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if names[i].val == names[j].val {
				return f, fmt.Errorf("data: %s and %s are both %q", names[i].key, names[j].key, names[i].val)
			}
		}
	}
	return f, nil
}

// Stats counts what a reader (or Tokenize) kept and skipped.
type Stats struct {
	Rows    int // rows seen, bad ones included
	Skipped int // bad rows skipped under SkipBadRows
	// Reasons holds the errors of the first MaxReasons skipped rows, so a log can say
	// why without keeping one error per row of a broken million-row file.
	Reasons []error
}

// MaxReasons bounds Stats.Reasons.
const MaxReasons = 10

func (s *Stats) skip(err error) {
	s.Skipped++
	if len(s.Reasons) < MaxReasons {
		s.Reasons = append(s.Reasons, err)
	}
}

// RowError is a bad row: its file, its position and what is wrong with it.
type RowError struct {
	File string // path of the file; the message shows its base name
	Line int    // as Example.Line: line (.jsonl) or row (.parquet), counted from 1
	Err  error
}

func (e *RowError) Error() string {
	name := filepath.Base(e.File)
	if strings.EqualFold(filepath.Ext(name), ".parquet") {
		return fmt.Sprintf("data: %s: row %d: %v", name, e.Line, e.Err)
	}
	return fmt.Sprintf("data: %s:%d: %v", name, e.Line, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// row is one input record, whichever file type it came from, so that format detection
// and validation are written once.
type row interface {
	// has reports whether the feature is present and not null.
	has(name string) bool
	// str returns a present string feature, or the problem with it.
	str(name string) (string, error)
	// messages returns a present list-of-messages feature, or the problem with it.
	messages(name string) ([]message, error)
	// isList reports whether a present feature is a list (content given as parts).
	isList(name string) bool
	// parts returns a present list-of-parts feature, or the problem with it.
	parts(name string) ([]part, error)
	// binary returns a present feature holding bytes (parquet binary, or an HF image
	// struct's bytes); ok is false for any other kind of value.
	binary(name string) (b []byte, ok bool)
}

// knownRole reports whether the chat template renders role (diffusiongemma.md §7.2);
// anything else is more likely a typo than a role the template should guess at.
func knownRole(role string) bool {
	switch role {
	case "system", "user", "assistant", "model":
		return true
	}
	return false
}

func errMissing(name string) error { return fmt.Errorf("missing %q", name) }

// parseRow detects the row's format and extracts the prompt conversation, its images
// (chat rows only) and the target.
func parseRow(r row, f features) ([]chat.Message, []imageRef, string, error) {
	switch {
	case r.has(f.prompt) || r.has(f.completion):
		if !r.has(f.prompt) {
			return nil, nil, "", errMissing(f.prompt)
		}
		if !r.has(f.completion) {
			return nil, nil, "", errMissing(f.completion)
		}
		p, err := r.str(f.prompt)
		if err != nil {
			return nil, nil, "", err
		}
		c, err := r.str(f.completion)
		if err != nil {
			return nil, nil, "", err
		}
		if c == "" {
			return nil, nil, "", fmt.Errorf("empty %q", f.completion)
		}
		return []chat.Message{{Role: "user", Content: p}}, nil, c, nil
	case r.has(f.chat):
		msgs, err := r.messages(f.chat)
		if err != nil {
			return nil, nil, "", err
		}
		return splitConversation(msgs, f.chat)
	case r.has(f.text):
		t, err := r.str(f.text)
		if err != nil {
			return nil, nil, "", err
		}
		if t == "" {
			return nil, nil, "", fmt.Errorf("empty %q", f.text)
		}
		return nil, nil, t, nil
	}
	return nil, nil, "", fmt.Errorf("none of %q/%q, %q or %q", f.prompt, f.completion, f.chat, f.text)
}

// splitConversation checks a conversation and splits it into prompt and target: the
// target is the final message, which must be a non-empty assistant turn without images,
// because any turn after the last assistant message would be neither prompt nor target
// and the canvas holds text only. The prompt's images come back in order.
func splitConversation(msgs []message, name string) ([]chat.Message, []imageRef, string, error) {
	if len(msgs) == 0 {
		return nil, nil, "", fmt.Errorf("%q is empty", name)
	}
	for i, m := range msgs {
		if !knownRole(m.Role) {
			return nil, nil, "", fmt.Errorf("%q[%d]: unknown role %q (want system, user, assistant or model)", name, i, m.Role)
		}
	}
	last := msgs[len(msgs)-1]
	if last.Role != "assistant" && last.Role != "model" {
		return nil, nil, "", fmt.Errorf("%q does not end with an assistant turn (last role is %q)", name, last.Role)
	}
	if len(last.images) > 0 {
		return nil, nil, "", fmt.Errorf("%q[%d].%s: the final assistant turn holds an image; images belong in the prompt", name, len(msgs)-1, last.images[0].where)
	}
	if last.Content == "" {
		return nil, nil, "", fmt.Errorf("%q: final assistant turn is empty", name)
	}
	var prompt []chat.Message
	var images []imageRef
	for i, m := range msgs[:len(msgs)-1] {
		prompt = append(prompt, m.Message)
		for _, ref := range m.images {
			ref.where = fmt.Sprintf("%q[%d].%s", name, i, ref.where)
			images = append(images, ref)
		}
	}
	return prompt, images, last.Content, nil
}

// collector turns rows into examples, applying the bad-row policy in one place for
// every file type.
type collector struct {
	file   string
	feat   features
	skip   bool
	out    []Example
	stats  Stats
	images map[string]*imageproc.Source // by cleaned path, so a file shared by rows is read once
}

// add parses one row found at line; a parse problem becomes a RowError, returned or
// counted. A non-nil result ends the read.
func (c *collector) add(r row, line int) error {
	prompt, refs, completion, err := parseRow(r, c.feat)
	if err != nil {
		return c.bad(line, err)
	}
	images, err := c.sources(refs)
	if err != nil {
		return c.bad(line, err)
	}
	c.stats.Rows++
	c.out = append(c.out, Example{Index: len(c.out), Line: line, Prompt: prompt, Completion: completion, Images: images})
	return nil
}

// bad reports a row that could not be read at all (e.g. malformed JSON).
func (c *collector) bad(line int, err error) error {
	c.stats.Rows++
	rerr := &RowError{File: c.file, Line: line, Err: err}
	if !c.skip {
		return rerr
	}
	c.stats.skip(rerr)
	return nil
}
