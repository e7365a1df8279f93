package generate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/data/chat"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// tinyGenerator is a random tiny model (vocabulary 512, canvas 16) with the synthetic
// byte-fallback tokenizer, a small step budget and no stop rule, so that its answers are
// long enough to span blocks. No EOS either unless a test sets one: a random model emits
// the end tokens anywhere.
func tinyGenerator(t *testing.T) *Generator {
	t.Helper()
	m := dgtest.Tiny(3, dg.BitsNone).Model(t, mxtest.Go(t))
	tok := dgtest.Tokenizer(t, m.Config)
	opt := dg.DefaultGenerateOptions(m.Config)
	opt.Steps, opt.MaxTokens, opt.MinCanvas, opt.MaxCanvas = 4, 20, 4, 8
	opt.StopRule, opt.EOS = nil, nil
	return &Generator{Model: m, Tokenizer: tok, Options: opt}
}

// writes records every Write separately.
type writes []string

func (w *writes) Write(p []byte) (int, error) { *w = append(*w, string(p)); return len(p), nil }

// A reply is the sampler's own result for the rendered prompt, written block by block:
// MaxTokens 20 over canvases of 8 are blocks of 8, 8 and 4 tokens, so the writes are the
// decodings of the first 8, 16 and 20 tokens, each less the one before (a write that would
// be empty is skipped), then the closing newline.
func TestReplyStreamsEachBlock(t *testing.T) {
	g := tinyGenerator(t)
	turns := []chat.Message{{Role: "user", Content: "say something"}}
	var w writes
	r, err := g.Reply(context.Background(), turns, &w)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := chat.EncodePrompt(g.Tokenizer, turns, true)
	if err != nil {
		t.Fatal(err)
	}
	want, err := g.Model.Generate(ids, g.Options)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Result.Tokens, want.Tokens) || r.PromptTokens != len(ids) || len(want.Tokens) != 20 {
		t.Fatalf("Reply tokens %v (prompt %d), Generate %v (prompt %d), want 20 tokens", r.Result.Tokens, r.PromptTokens, want.Tokens, len(ids))
	}
	var wantWrites []string
	prev := ""
	for _, end := range []int{8, 16, 20} {
		text := g.Tokenizer.Decode(want.Tokens[:end], true)
		if end < 20 {
			text = strings.TrimRight(text, "\uFFFD")
		}
		if len(text) > len(prev) {
			wantWrites = append(wantWrites, text[len(prev):])
			prev = text
		}
	}
	wantWrites = append(wantWrites, "\n")
	if !slices.Equal(w, wantWrites) {
		t.Errorf("writes %q, want %q", []string(w), wantWrites)
	}
	if text := g.Tokenizer.Decode(want.Tokens, true); r.Text != text {
		t.Errorf("Text %q, want %q", r.Text, text)
	}
	sum := r.Summary()
	if !strings.HasPrefix(sum, "20 tokens in 3 blocks, "+strconv.Itoa(want.Steps)+" denoising steps (reached --max-tokens), ") ||
		!strings.HasSuffix(sum, " tokens/s; prompt "+strconv.Itoa(len(ids))+" tokens") {
		t.Errorf("summary %q, want 20 tokens in 3 blocks, %d passes and the prompt's %d tokens", sum, want.Steps, len(ids))
	}
}

// A character whose UTF-8 bytes are split across blocks (byte-fallback tokens) is written
// once whole, not as replacement characters: "é" is <0xC3><0xA9>. (HF's byte-fallback
// decoder turns every byte token of an invalid run into U+FFFD, so the "a" byte token just
// before waits with it.)
func TestTextStreamJoinsSplitCharacters(t *testing.T) {
	g := tinyGenerator(t)
	ids := g.Tokenizer.Encode("baé") // four byte tokens: the synthetic tokenizer has no merges
	if len(ids) != 4 {
		t.Fatalf("Encode(baé) = %v, want four byte tokens", ids)
	}
	var w writes
	st := &textStream{tok: g.Tokenizer, w: &w}
	for _, step := range []struct {
		ids  []int32
		last bool
	}{{ids[:1], false}, {ids[1:3], false}, {ids[3:], false}, {nil, true}} {
		if err := st.add(step.ids, step.last); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"b", "aé"}; !slices.Equal(w, want) {
		t.Errorf("writes %q, want %q", []string(w), want)
	}
	// At the end a lone byte is written as what it decodes to.
	w = nil
	st = &textStream{tok: g.Tokenizer, w: &w}
	if err := st.add(ids[2:3], true); err != nil {
		t.Fatal(err)
	}
	if want := []string{"\uFFFD"}; !slices.Equal(w, want) {
		t.Errorf("lone byte: writes %q, want %q", []string(w), want)
	}
}

// A chat's second turn is generated from the whole conversation: the system turn, the first
// message, the first answer (as the model turn) and the second message, rendered with the
// chat template; its answer is what a one-shot Reply gives on that conversation. Empty
// lines are skipped; /exit ends the chat (the line after it is never read).
func TestChatKeepsEarlierTurns(t *testing.T) {
	g := tinyGenerator(t)
	g.System = "be brief"
	var prompts [][]chat.Message
	var promptIDs [][]int32
	g.OnPrompt = func(turns []chat.Message, ids []int32) {
		prompts = append(prompts, slices.Clone(turns))
		promptIDs = append(promptIDs, slices.Clone(ids))
	}
	var out, log strings.Builder
	c := &Chat{Generator: g, In: strings.NewReader("first message\n\n  second message  \n/exit\nnever read\n"), Out: &out, Log: &log}
	if err := c.Run(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if len(prompts) != 2 || len(c.Turns) != 4 {
		t.Fatalf("%d prompts, %d turns kept, want 2 and 4: %v", len(prompts), len(c.Turns), prompts)
	}
	answer1 := c.Turns[1].Content
	want := []chat.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "first message"},
		{Role: "model", Content: answer1}, {Role: "user", Content: "second message"}}
	if !slices.Equal(prompts[1], want) {
		t.Errorf("second prompt %v, want %v", prompts[1], want)
	}
	ids, err := chat.EncodePrompt(g.Tokenizer, want, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(promptIDs[1], ids) {
		t.Errorf("second prompt ids %v, want the template's %v", promptIDs[1], ids)
	}
	// The same conversation answered in one shot.
	g.OnPrompt = nil
	var one strings.Builder
	r, err := g.Reply(context.Background(), want[1:], &one)
	if err != nil {
		t.Fatal(err)
	}
	if c.Turns[3].Content != r.Text || out.String() != answer1+"\n"+r.Text+"\n" {
		t.Errorf("chat wrote %q (second answer %q), one-shot second answer %q", out.String(), c.Turns[3].Content, r.Text)
	}
	if n := strings.Count(log.String(), " tokens/s; prompt "); n != 2 || strings.Contains(log.String(), ChatPrompt) {
		t.Errorf("log %q: want two summaries and no prompt marker (not interactive)", log.String())
	}
}

// /reset forgets the turns so far; a conversation that no longer fits
// max_position_embeddings drops its oldest exchanges, and says so; the end of the input
// ends the chat like /exit.
func TestChatResetAndOverflow(t *testing.T) {
	g := tinyGenerator(t)
	var prompts [][]chat.Message
	g.OnPrompt = func(turns []chat.Message, _ []int32) { prompts = append(prompts, slices.Clone(turns)) }
	var out, log strings.Builder
	c := &Chat{Generator: g, In: strings.NewReader("one\n/reset\ntwo\nthree"), Out: &out, Log: &log}
	// Room for "two" alone and 20 tokens, not for two + its answer + three.
	_, ids, err := g.Prompt([]chat.Message{{Role: "user", Content: "three"}})
	if err != nil {
		t.Fatal(err)
	}
	g.Model.Config.TextConfig.MaxPositionEmbeddings = len(ids) + g.Options.MaxTokens + 5
	if err := c.Run(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	want := [][]chat.Message{{{Role: "user", Content: "one"}}, {{Role: "user", Content: "two"}}, {{Role: "user", Content: "three"}}}
	if len(prompts) != 3 || !slices.Equal(prompts[0], want[0]) || !slices.Equal(prompts[1], want[1]) || !slices.Equal(prompts[2], want[2]) {
		t.Errorf("prompts %v, want %v", prompts, want)
	}
	for _, line := range []string{"chat: the conversation starts over\n",
		"chat: the conversation no longer fits the model's max_position_embeddings: dropped its first 1 exchange\n"} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("log %q lacks %q", log.String(), line)
		}
	}
	// One message alone that cannot fit is an error, not an endless drop.
	g.Model.Config.TextConfig.MaxPositionEmbeddings = len(ids)
	c = &Chat{Generator: g, In: strings.NewReader("three\n"), Out: &out, Log: &log}
	wantErr := "the prompt is " + strconv.Itoa(len(ids)) + " tokens: with --max-tokens 20 that is more than the model's max_position_embeddings " + strconv.Itoa(len(ids))
	if err := c.Run(context.Background(), ""); err == nil || err.Error() != wantErr {
		t.Errorf("Run = %v, want %q", err, wantErr)
	}
}

// A cancelled context stops a reply before its first pass: nothing is written and the
// error says it was interrupted.
func TestReplyInterrupted(t *testing.T) {
	g := tinyGenerator(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var w writes
	r, err := g.Reply(ctx, []chat.Message{{Role: "user", Content: "hi"}}, &w)
	if !errors.Is(err, dg.ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Reply on a cancelled context: %v, want ErrInterrupted wrapping context.Canceled", err)
	}
	if len(w) != 0 || r.Text != "" || r.Result.Steps != 0 {
		t.Errorf("interrupted reply wrote %q, text %q after %d passes; want nothing", []string(w), r.Text, r.Result.Steps)
	}
}

func TestOptions(t *testing.T) {
	g := tinyGenerator(t) // canvas_length 16, generation config: 256 tokens, 48 steps
	turnEnd, _ := g.Tokenizer.TokenID("<turn|>")
	eos, _ := g.Tokenizer.TokenID("<eos>")
	trained := func(canvas int, eosFill bool) *Trained {
		return &Trained{Recorded: true, MaxCanvas: canvas, EOSFill: eosFill}
	}
	tests := []struct {
		name      string
		s         Settings
		adapter   *Trained
		maxCanvas int
		notes     []string
	}{
		{"base alone: the model's canvas", Settings{}, nil, 16, nil},
		{"adapter's max_canvas", Settings{}, trained(8, true), 8,
			[]string{"blocks of 8 tokens, the max_canvas it was trained with (--canvas overrides)", "trained with eos_fill: an answer ends at its <turn|>"}},
		{"adapter's max_canvas capped", Settings{}, trained(256, false), 16,
			[]string{"blocks of 16 tokens, the max_canvas it was trained with (256) capped at the model's canvas_length (--canvas overrides)",
				"trained without eos_fill, so it never saw where an answer ends: expect answers to run to --max-tokens (256)"}},
		{"--canvas over the adapter's", Settings{Canvas: 12, MaxTokens: 30}, trained(8, false), 12,
			[]string{"blocks of 12 tokens (--canvas); it was trained on canvases of 8",
				"trained without eos_fill, so it never saw where an answer ends: expect answers to run to --max-tokens (30)"}},
		{"--canvas equal to the adapter's", Settings{Canvas: 8}, trained(8, true), 8,
			[]string{"trained with eos_fill: an answer ends at its <turn|>"}},
		{"adapter without training settings", Settings{}, &Trained{}, 16,
			[]string{"its adapter_config.json records no training settings: blocks of the model's canvas_length 16"}},
	}
	for _, tc := range tests {
		opt, notes, err := Options(g.Model, g.Tokenizer, tc.s, tc.adapter)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if opt.MaxCanvas != tc.maxCanvas || !slices.Equal(notes, tc.notes) {
			t.Errorf("%s: MaxCanvas %d, notes %q; want %d, %q", tc.name, opt.MaxCanvas, notes, tc.maxCanvas, tc.notes)
		}
	}
	// The sampler's knobs: zero takes the generation config's, and the answer ends at the
	// checkpoint's EOS ids (1, 50, 106 for the tiny preset) or the tokenizer's <eos>/<turn|>.
	opt, _, err := Options(g.Model, g.Tokenizer, Settings{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opt.MaxTokens != 256 || opt.Steps != 48 || opt.Sampler != dg.SamplerConfidence || opt.Temperature != 0 || opt.Seed != 0 {
		t.Errorf("defaults: %+v", opt)
	}
	for _, id := range []int{1, 50, 106, int(turnEnd), int(eos)} {
		if !slices.Contains(opt.EOS, id) {
			t.Errorf("EOS %v lacks %d", opt.EOS, id)
		}
	}
	opt, _, err = Options(g.Model, g.Tokenizer, Settings{MaxTokens: 7, Steps: 3, Sampler: dg.SamplerEntropy, Temperature: 0.5, Seed: 9}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opt.MaxTokens != 7 || opt.Steps != 3 || opt.Sampler != dg.SamplerEntropy || opt.Temperature != 0.5 || opt.Seed != 9 {
		t.Errorf("settings not applied: %+v", opt)
	}
}

func TestOptionsRefusals(t *testing.T) {
	g := tinyGenerator(t)
	tests := []struct {
		s    Settings
		want string
	}{
		{Settings{MaxTokens: -1}, "--max-tokens -1: want a positive number (0 = the checkpoint's max_new_tokens)"},
		{Settings{Steps: -2}, "--steps -2: want a positive number (0 = the checkpoint's max_denoising_steps)"},
		{Settings{Canvas: -3}, "--canvas -3: want a positive number (0 = the adapter's max_canvas, else the model's canvas_length)"},
		{Settings{Temperature: -0.5}, "--temp -0.5: want 0 (greedy) or a finite positive temperature"},
		{Settings{Sampler: "topk"}, `--sampler "topk": want confidence or entropy`},
		{Settings{Canvas: 17}, "--canvas 17: the model's canvas_length is 16"},
	}
	for _, tc := range tests {
		if _, _, err := Options(g.Model, g.Tokenizer, tc.s, nil); err == nil || err.Error() != tc.want {
			t.Errorf("Options(%+v) = %v, want %q", tc.s, err, tc.want)
		}
	}
}

func TestReadTrained(t *testing.T) {
	tests := []struct {
		name, config string // "" = no adapter_config.json
		want         Trained
		wantErr      string // with %s for the file's path
	}{
		{"dgtune", `{"base_model": "/m", "training": {"max_canvas": 8, "eos_fill": true, "iters": 3}}`,
			Trained{BaseModel: "/m", Recorded: true, MaxCanvas: 8, EOSFill: true}, ""},
		{"dgtune without eos_fill", `{"base_model": "/m", "training": {"max_canvas": 256, "eos_fill": false}}`,
			Trained{BaseModel: "/m", Recorded: true, MaxCanvas: 256}, ""},
		{"PEFT", `{"base_model_name_or_path": "google/x", "r": 8}`, Trained{BaseModel: "google/x"}, ""},
		{"training without max_canvas", `{"training": {"eos_fill": true}}`, Trained{}, ""},
		{"optiq: no adapter_config.json", "", Trained{}, ""},
		{"not JSON", `{"base_model": `, Trained{}, "%s: unexpected end of JSON input"},
		{"bad max_canvas", `{"training": {"max_canvas": 0, "eos_fill": true}}`, Trained{}, "%s: training.max_canvas 0: want a positive number"},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		path := filepath.Join(dir, "adapter_config.json")
		if tc.config != "" {
			if err := os.WriteFile(path, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := ReadTrained(dir)
		if tc.wantErr != "" {
			if want := strings.ReplaceAll(tc.wantErr, "%s", path); err == nil || err.Error() != want {
				t.Errorf("%s: error %v, want %q", tc.name, err, want)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: ReadTrained = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}
