package chat

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/tokenizer"
)

func TestRender(t *testing.T) {
	cases := []struct {
		name string
		msgs []Message
		gen  bool
		want string
	}{
		{
			// The spec §7.2 golden string.
			name: "single turn with generation prompt",
			msgs: []Message{{"user", "What is 2+2?"}},
			gen:  true,
			want: "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
		},
		{
			name: "single turn without generation prompt",
			msgs: []Message{{"user", "What is 2+2?"}},
			want: "<bos><|turn>user\nWhat is 2+2?<turn|>\n",
		},
		{
			name: "system and multi-turn",
			msgs: []Message{
				{"system", "You are terse."},
				{"user", "Hi"},
				{"assistant", "Hello."},
				{"user", "What is 2+2?"},
			},
			gen: true,
			want: "<bos><|turn>system\nYou are terse.<turn|>\n" +
				"<|turn>user\nHi<turn|>\n" +
				"<|turn>model\nHello.<turn|>\n" +
				"<|turn>user\nWhat is 2+2?<turn|>\n" +
				"<|turn>model\n<|channel>thought\n<channel|>",
		},
		{
			name: "model role word",
			msgs: []Message{{"user", "a"}, {"model", "b"}},
			want: "<bos><|turn>user\na<turn|>\n<|turn>model\nb<turn|>\n",
		},
		{
			// Jinja's trim: surrounding whitespace (Python's set, with U+001F) goes, inner stays.
			name: "contents trimmed",
			msgs: []Message{{"user", " \n\u3000two  words\t\x1f"}},
			want: "<bos><|turn>user\ntwo  words<turn|>\n",
		},
		{
			name: "thinking stripped from model history",
			msgs: []Message{{"user", "q"}, {"assistant", "<|channel>thought\nplan<channel|> Answer "}},
			want: "<bos><|turn>user\nq<turn|>\n<|turn>model\nAnswer<turn|>\n",
		},
		{
			// User text keeps channel markers: only model turns are stripped.
			name: "user text not stripped",
			msgs: []Message{{"user", "<|channel>x<channel|>y"}},
			want: "<bos><|turn>user\n<|channel>x<channel|>y<turn|>\n",
		},
		{
			name: "image placeholder verbatim",
			msgs: []Message{{"user", "<|image|>Describe this image in one short sentence."}},
			gen:  true,
			want: "<bos><|turn>user\n<|image|>Describe this image in one short sentence.<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
		},
		{
			name: "empty content",
			msgs: []Message{{"user", ""}},
			gen:  true,
			want: "<bos><|turn>user\n<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Render(c.msgs, c.gen)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Render = %q\nwant     %q", got, c.want)
			}
			if n := strings.Count(got, BOS); n != 1 {
				t.Errorf("Render has %d <bos>, want 1", n)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	if _, err := Render(nil, true); !errors.Is(err, ErrNoMessages) {
		t.Errorf("Render(nil) error = %v, want ErrNoMessages", err)
	}
	_, err := Render([]Message{{"user", "a"}, {"tool", "b"}}, false)
	if err == nil || !strings.Contains(err.Error(), `message 1: unknown role "tool"`) {
		t.Errorf("Render(tool role) error = %v, want one naming message 1 and the role", err)
	}
	if _, err := Render([]Message{{"", "a"}}, false); err == nil {
		t.Error("Render(empty role) succeeded")
	}
}

// byteOnly is a synthetic tokenizer without a corpus: every character is byte tokens,
// <0xNN> = 108+NN, except "▁" (a space) = 364 and "\n" = 107, so ids follow by hand.
func byteOnly(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	data, err := tokenizer.NewSynthetic(512, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func bytesOf(s string) []int32 {
	var ids []int32
	for _, c := range []byte(s) {
		switch c {
		case ' ':
			ids = append(ids, 364)
		case '\n':
			ids = append(ids, 107)
		default:
			ids = append(ids, 108+int32(c))
		}
	}
	return ids
}

func TestEncodePrompt(t *testing.T) {
	tok := byteOnly(t)
	ids, err := EncodePrompt(tok, []Message{{"user", "What is 2+2?"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	// The spec's shape 2, 105, user, 107, content, 106, 107, 105, model, 107, 100, thought,
	// 107, 101 with the synthetic ids: specials at their real ids, words as byte tokens
	// ("user" = 0x75 0x73 0x65 0x72 → 225 223 209 222).
	want := slices.Concat(
		[]int32{2, 105}, bytesOf("user\n"), bytesOf("What is 2+2?"), []int32{106, 107},
		[]int32{105}, bytesOf("model\n"), []int32{100}, bytesOf("thought\n"), []int32{101},
	)
	if !slices.Equal(ids, want) {
		t.Errorf("EncodePrompt = %v\nwant          %v", ids, want)
	}
	if n := count(ids, 2); n != 1 {
		t.Errorf("prompt has %d BOS ids, want 1", n)
	}
}

func TestEncodePromptImage(t *testing.T) {
	tok := byteOnly(t)
	ids, err := EncodePrompt(tok, []Message{{"user", "<|image|>Hi"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	_, image, _ := tokenizer.SyntheticImageIDs(512)
	want := slices.Concat([]int32{2, 105}, bytesOf("user\n"), []int32{image}, bytesOf("Hi"), []int32{106, 107})
	if !slices.Equal(ids, want) {
		t.Errorf("EncodePrompt = %v, want %v", ids, want)
	}
}

func count(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// fakeEncoder lets the tests break one contract at a time.
type fakeEncoder struct {
	ids   map[string]int32
	extra []int32 // prepended to every encoding
}

func (f fakeEncoder) Encode(text string) []int32 {
	ids := slices.Clone(f.extra)
	for _, s := range []string{BOS, TurnOpen} {
		if strings.HasPrefix(text, s) {
			if id, ok := f.ids[s]; ok {
				ids = append(ids, id)
			}
			text = strings.TrimPrefix(text, s)
		}
	}
	return append(ids, 99)
}

func (f fakeEncoder) TokenID(s string) (int32, bool) {
	id, ok := f.ids[s]
	return id, ok
}

func TestEncodePromptErrors(t *testing.T) {
	full := map[string]int32{BOS: 2, TurnOpen: 105, TurnClose: 106, ChannelOpen: 100, ChannelClose: 101}
	without := func(s string) map[string]int32 {
		m := map[string]int32{}
		for k, v := range full {
			if k != s {
				m[k] = v
			}
		}
		return m
	}
	msgs := []Message{{"user", "hi"}}
	cases := []struct {
		name string
		enc  fakeEncoder
		gen  bool
		msg  string
	}{
		{"no bos token", fakeEncoder{ids: without(BOS)}, false, "no <bos> token"},
		{"no channel token", fakeEncoder{ids: without(ChannelClose)}, true, "no <channel|> token"},
		{"encoder adds bos", fakeEncoder{ids: full, extra: []int32{2}}, false, "two <bos>"},
		{"bos not special", fakeEncoder{ids: full, extra: []int32{7}}, false, "does not start with <bos>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := EncodePrompt(c.enc, msgs, c.gen)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("EncodePrompt error = %v, want it to mention %q", err, c.msg)
			}
		})
	}
	// The channel tokens are needed only for the generation prompt.
	if _, err := EncodePrompt(fakeEncoder{ids: without(ChannelClose)}, msgs, false); err != nil {
		t.Errorf("EncodePrompt without generation prompt: %v", err)
	}
	if _, err := EncodePrompt(fakeEncoder{ids: full}, nil, true); !errors.Is(err, ErrNoMessages) {
		t.Errorf("EncodePrompt(nil) error = %v, want ErrNoMessages", err)
	}
}

// A training prompt (the turns before the target) renders with the generation prompt
// like any other prompt.
func TestTrainingPromptEncode(t *testing.T) {
	tok := byteOnly(t)
	ids, err := EncodePrompt(tok, []Message{{"user", "hi"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat([]int32{2, 105}, bytesOf("user\nhi"), []int32{106, 107, 105}, bytesOf("model\n"), []int32{100}, bytesOf("thought\n"), []int32{101})
	if !slices.Equal(ids, want) {
		t.Errorf("ids = %v, want %v", ids, want)
	}
}

// NeMo AutoModel's template (examples/dllm_sft/diffusion_gemma_chat_template.jinja) renders
// the turns as Render does and ends the prompt at the opened model turn; the response is
// the trimmed content without thought channels, closed by "<turn|>\n".
func TestRenderNeMo(t *testing.T) {
	msgs := []Message{{Role: "system", Content: " Be brief. "}, {Role: "user", Content: "\thi\n"},
		{Role: "assistant", Content: "<|channel>thought\nx<channel|> hello "}, {Role: "user", Content: "again"}}
	got, err := RenderNeMo(msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nhi<turn|>\n<|turn>model\nhello<turn|>\n<|turn>user\nagain<turn|>\n<|turn>model\n"
	if got != want {
		t.Errorf("RenderNeMo = %q, want %q", got, want)
	}
	for _, c := range []struct{ in, want string }{
		{" chff \n", "chff<turn|>\n"},
		{"<|channel>thought\nplan<channel|>\n answer", "answer<turn|>\n"},
		{"", "<turn|>\n"},
	} {
		if got := NeMoResponse(c.in); got != c.want {
			t.Errorf("NeMoResponse(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if _, err := RenderNeMo(nil); err != ErrNoMessages {
		t.Errorf("RenderNeMo(nil) error = %v, want ErrNoMessages", err)
	}
}
