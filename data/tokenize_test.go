package data

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// byteEncoder stands in for the chat template and tokenizer: the prompt is one id per
// prompt message (its content length), the target one id per non-space byte of the
// completion, so a completion of spaces encodes to nothing.
func byteEncoder(ex Example) ([]int32, []int32, error) {
	var prompt, target []int32
	for _, m := range ex.Prompt {
		prompt = append(prompt, int32(len(m.Content)))
	}
	for _, b := range []byte(ex.Completion) {
		if b != ' ' {
			target = append(target, int32(b))
		}
	}
	return prompt, target, nil
}

func tokenizeSplit() *Split {
	return &Split{Name: "train", Path: "/d/train.jsonl", Examples: []Example{
		{Index: 0, Line: 1, Prompt: user("hello"), Completion: "ab"},
		{Index: 1, Line: 3, Completion: "  "},
		{Index: 2, Line: 4, Prompt: msgs("system", "s", "user", "xyz"), Completion: "c d"},
	}}
}

func TestTokenize(t *testing.T) {
	_, _, err := Tokenize(tokenizeSplit(), byteEncoder, Options{})
	if got, want := errString(err), "data: train.jsonl:3: example 1: empty target after encoding"; got != want {
		t.Errorf("err = %s, want %s", got, want)
	}

	pairs, stats, err := Tokenize(tokenizeSplit(), byteEncoder, Options{SkipBadRows: true})
	if err != nil {
		t.Fatal(err)
	}
	// 'a'=97 'b'=98 'c'=99 'd'=100; prompt ids are content lengths: "hello"→5,
	// "s"→1, "xyz"→3.
	want := []Pair{
		{Index: 0, Prompt: []int32{5}, Target: []int32{97, 98}},
		{Index: 2, Prompt: []int32{1, 3}, Target: []int32{99, 100}},
	}
	if !reflect.DeepEqual(pairs, want) {
		t.Errorf("pairs = %v, want %v", pairs, want)
	}
	if stats.Rows != 3 || stats.Skipped != 1 || len(stats.Reasons) != 1 {
		t.Errorf("stats = %+v, want Rows 3, Skipped 1, one reason", stats)
	}
}

func TestTokenizeErrors(t *testing.T) {
	boom := errors.New("template: unknown role")
	failOn2 := func(ex Example) ([]int32, []int32, error) {
		if ex.Index == 2 {
			return nil, nil, boom
		}
		return byteEncoder(ex)
	}
	// Encoder failures are fatal even when skipping bad rows.
	_, _, err := Tokenize(tokenizeSplit(), failOn2, Options{SkipBadRows: true})
	if got, want := errString(err), "data: train.jsonl:4: example 2: encode: template: unknown role"; got != want {
		t.Errorf("err = %s, want %s", got, want)
	}
	if !errors.Is(err, boom) {
		t.Errorf("err %v does not wrap the encoder's error", err)
	}

	blank := &Split{Path: "/d/valid.parquet", Examples: []Example{{Index: 0, Line: 1, Completion: " "}, {Index: 1, Line: 8, Completion: "  "}}}
	_, _, err = Tokenize(blank, byteEncoder, Options{SkipBadRows: true})
	if got, want := errString(err), "data: /d/valid.parquet: no example has a non-empty target (2 skipped)"; got != want {
		t.Errorf("err = %s, want %s", got, want)
	}
	_, _, err = Tokenize(blank, byteEncoder, Options{})
	if got, want := errString(err), "data: valid.parquet: row 1: example 0: empty target after encoding"; got != want {
		t.Errorf("err = %s, want %s", got, want)
	}

	// An empty split tokenizes to nothing without error; the caller decides.
	pairs, _, err := Tokenize(&Split{Path: "valid.jsonl"}, byteEncoder, Options{})
	if err != nil || len(pairs) != 0 {
		t.Errorf("empty split: %v, %v; want no pairs, nil", pairs, err)
	}
}

// Tokenize feeds the loaded examples straight through: a round trip from a file.
func TestTokenizeFromFile(t *testing.T) {
	path := t.TempDir() + "/train.jsonl"
	writeFile(t, path, strings.Join([]string{`{"prompt":"hi","completion":"ok"}`, `{"text":"z"}`}, "\n"))
	s, err := ReadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pairs, _, err := Tokenize(s, byteEncoder, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// "hi" has length 2; 'o'=111 'k'=107 'z'=122; the text row has no prompt ids.
	want := []Pair{{Index: 0, Prompt: []int32{2}, Target: []int32{111, 107}}, {Index: 1, Target: []int32{122}}}
	if !reflect.DeepEqual(pairs, want) {
		t.Errorf("pairs = %v, want %v", pairs, want)
	}
}
