package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/generate"
	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/train"
)

// demo is the embedded demo's adapter, trained once for the package's tests with
// configs/tiny.yaml's settings for 150 steps (about 5 s on 2 cores; the demo's eval scores
// it 1.000 exact match already).
var demo struct {
	once          sync.Once
	root, adapter string
	tmp           string
	err           error
}

// TestMain removes the shared demo adapter and build.
func TestMain(m *testing.M) {
	code := m.Run()
	if demo.tmp != "" {
		os.RemoveAll(demo.tmp)
	}
	command.Remove()
	os.Exit(code)
}

// demoAdapter returns the repository root and the trained demo adapter's directory.
func demoAdapter(t *testing.T) (root, adapter string) {
	t.Helper()
	demo.once.Do(func() {
		if demo.root, demo.err = filepath.Abs("../.."); demo.err != nil {
			return
		}
		var cfg config.Config
		if cfg, demo.err = config.Load(filepath.Join(demo.root, "configs", "tiny.yaml"), nil); demo.err != nil {
			return
		}
		if demo.tmp, demo.err = os.MkdirTemp("", "generate-demo-"); demo.err != nil {
			return
		}
		cfg.Model = filepath.Join(demo.root, cfg.Model)
		cfg.Data = filepath.Join(demo.root, cfg.Data)
		cfg.AdapterPath = filepath.Join(demo.tmp, "tiny-demo")
		cfg.Iters, cfg.StepsPerEval, cfg.ValBatches, cfg.SaveEvery = 150, 0, 2, 0
		_, demo.err = train.Run(context.Background(), cfg, train.Options{Log: io.Discard})
		demo.adapter = cfg.AdapterPath
	})
	if demo.err != nil {
		t.Fatalf("train the demo adapter: %v", demo.err)
	}
	return demo.root, demo.adapter
}

// runCmd runs the command in-process on the go engine with stdin.
func runCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runOn(t, "go", stdin, args...)
}

// runOn runs the command in-process on the named engine with stdin.
func runOn(t *testing.T, backend, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newCommand()
	cmd.SetIn(strings.NewReader(stdin))
	code = cli.Main(cmd, append(args, "--backend", backend), &out, &errb)
	return code, out.String(), errb.String()
}

type row struct{ Prompt, Completion string }

func readRows(t *testing.T, path string) []row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestDemoShiftAnswers: generate with the demo adapter answers every one of the demo's 64
// shift test prompts with its reference (each letter replaced by the next: "shift: ddhc" →
// "eead"), as the demo's eval scores it, on every engine compiled in; the base alone,
// pretrained to copy, does not. It takes the base model, the canvas (8) and eos_fill from
// the adapter and says so.
func TestDemoShiftAnswers(t *testing.T) {
	root, adapter := demoAdapter(t)
	rows := readRows(t, filepath.Join(root, "demo", "data", "shift", "test.jsonl"))
	if len(rows) != 64 {
		t.Fatalf("%d test rows, want the demo's 64", len(rows))
	}
	base := filepath.Join(root, "demo", "base")
	for _, engine := range mx.Engines() {
		t.Run(engine, func(t *testing.T) {
			baseRight := 0
			for i, r := range rows {
				code, stdout, stderr := runOn(t, engine, "", "--adapter", adapter, "--prompt", r.Prompt)
				if code != 0 || stdout != r.Completion+"\n" {
					t.Errorf("generate --adapter --prompt %q: exit %d, stdout %q, want %q\n%s", r.Prompt, code, stdout, r.Completion+"\n", stderr)
				}
				if i == 0 {
					e, err := mx.Open(engine)
					if err != nil {
						t.Fatal(err)
					}
					want := []string{
						"model " + base + " (the adapter's base_model), engine " + mx.Describe(e),
						"adapter " + adapter + ": blocks of 8 tokens, the max_canvas it was trained with (--canvas overrides)",
						"adapter " + adapter + ": trained with eos_fill: an answer ends at its <turn|>",
						"sampler confidence, at most 48 denoising steps per block, temp 0, seed 0, at most 256 tokens",
					}
					lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
					if len(lines) != 5 || strings.Join(lines[:4], "\n") != strings.Join(want, "\n") ||
						!strings.HasPrefix(lines[4], "4 tokens in 1 block, ") || !strings.Contains(lines[4], " tokens/s; prompt ") {
						t.Errorf("stderr:\n%s\nwant:\n%s\n4 tokens in 1 block, … tokens/s; prompt … tokens", stderr, strings.Join(want, "\n"))
					}
				}
				code, stdout, stderr = runOn(t, engine, "", "--model", base, "--prompt", r.Prompt)
				if code != 0 {
					t.Fatalf("generate --model demo/base: exit %d\n%s", code, stderr)
				}
				if stdout == r.Completion+"\n" {
					baseRight++
				}
			}
			// The demo's eval scores the base about 0 exact match on shift.
			if baseRight > len(rows)/10 {
				t.Errorf("the base alone answers %d of %d shift prompts right, want about none", baseRight, len(rows))
			}
		})
	}
}

// TestPromptSources: the same message from --prompt, --prompt-file, --prompt - and piped
// stdin gets the same answer (the template trims the file's and stdin's newline).
func TestPromptSources(t *testing.T) {
	_, adapter := demoAdapter(t)
	file := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(file, []byte("shift: ddhc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, stdin string
		args        []string
	}{
		{"--prompt", "ignored", []string{"--prompt", "shift: ddhc"}},
		{"--prompt-file", "", []string{"--prompt-file", file}},
		{"--prompt -", "shift: ddhc\n", []string{"--prompt", "-"}},
		{"stdin", "shift: ddhc\n", nil},
	} {
		code, stdout, stderr := runCmd(t, tc.stdin, append([]string{"--adapter", adapter}, tc.args...)...)
		if code != 0 || stdout != "eead\n" {
			t.Errorf("%s: exit %d, stdout %q, want \"eead\\n\"\n%s", tc.name, code, stdout, stderr)
		}
	}
}

// TestChatTwoTurns: --chat over a scripted stdin answers each line; the second answer is
// the one generated for the whole conversation (first message, first answer, second
// message), and the first is the one-shot answer. --prompt gives the first turn.
func TestChatTwoTurns(t *testing.T) {
	root, adapter := demoAdapter(t)
	code, stdout, stderr := runCmd(t, "shift: ddhc\nshift: hgbg\n", "--adapter", adapter, "--chat")
	if code != 0 {
		t.Fatalf("--chat: exit %d\n%s", code, stderr)
	}
	answers := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(answers) != 2 || answers[0] != "eead" {
		t.Fatalf("--chat answered %q, want two lines, the first \"eead\"", stdout)
	}
	if n := strings.Count(stderr, " tokens/s; prompt "); n != 2 {
		t.Errorf("stderr has %d summaries, want one per answer:\n%s", n, stderr)
	}
	// The second answer, recomputed from the conversation with the package.
	g, err := generate.Load("go", filepath.Join(root, "demo", "base"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := lora.LoadDir(g.Model.Engine, adapter)
	if err != nil {
		t.Fatal(err)
	}
	trained, err := generate.ReadTrained(adapter)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Mount(f, adapter, "demo/base"); err != nil {
		t.Fatal(err)
	}
	if g.Options, _, err = generate.Options(g.Model, g.Tokenizer, generate.Settings{}, &trained); err != nil {
		t.Fatal(err)
	}
	turns := []chat.Message{{Role: "user", Content: "shift: ddhc"}, {Role: "model", Content: "eead"}, {Role: "user", Content: "shift: hgbg"}}
	r, err := g.Reply(context.Background(), turns, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if answers[1] != r.Text {
		t.Errorf("second chat answer %q, want %q (the answer to the whole conversation)", answers[1], r.Text)
	}
	code, stdout2, stderr := runCmd(t, "shift: hgbg\n/exit\nshift: affg\n", "--adapter", adapter, "--chat", "--prompt", "shift: ddhc")
	if code != 0 || stdout2 != stdout {
		t.Errorf("--chat --prompt: exit %d, stdout %q, want %q\n%s", code, stdout2, stdout, stderr)
	}
}

// writeModel writes the tiny preset, changed by mutate, with random weights and the
// synthetic tokenizer.
func writeModel(t *testing.T, dir string, mutate func(*dg.Config)) {
	t.Helper()
	dgtest.Spec{Preset: dg.PresetTiny, Seed: 2, Bits: dg.BitsNone, Edit: mutate}.Checkpoint(t, mxtest.Go(t), dir)
}

// TestOtherBaseSameShapes: an adapter on a --model of its geometry that is not its
// base_model generates, and says which base it was trained on.
func TestOtherBaseSameShapes(t *testing.T) {
	root, adapter := demoAdapter(t)
	other := filepath.Join(t.TempDir(), "tiny")
	writeModel(t, other, nil) // the tiny preset: demo/base's geometry, other weights
	code, _, stderr := runCmd(t, "", "--adapter", adapter, "--model", other, "--prompt", "shift: ddhc", "--max-tokens", "8")
	want := "adapter " + adapter + ": trained on base_model " + filepath.Join(root, "demo", "base") + ", not on --model " + other + "\n"
	if code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant the line %q", code, stderr, want)
	}
}

// TestBadInput: each mistake is one line on stderr, exit 1, and nothing on stdout.
func TestBadInput(t *testing.T) {
	root, adapter := demoAdapter(t)
	base := filepath.Join(root, "demo", "base")
	dir := t.TempDir()
	narrow := filepath.Join(dir, "narrow")
	writeModel(t, narrow, func(c *dg.Config) { c.TextConfig.HiddenSize = 32 })
	blank := filepath.Join(dir, "blank.txt")
	if err := os.WriteFile(blank, []byte(" \n\t\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "adapter_config.json"), []byte(`{"base_model": `), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"missing model dir", "", []string{"--model", missing, "--prompt", "hi"},
			`generate: --model "` + missing + `": not found`},
		// 2 layers × 7 keys less the full-attention layer 1's v_proj (full layers take their
		// values from k_proj): 13 modules. In model order the first is layer 0's q_proj,
		// whose A is [hidden, rank]: [64 8] as trained, [32 8] on this model.
		{"adapter from another base", "", []string{"--model", narrow, "--adapter", adapter, "--prompt", "hi"},
			"generate: --adapter " + adapter + " does not fit --model " + narrow + ": 13 of 13 modules differ at rank 8 " +
				"(the adapter was trained on " + base + "); the first model.decoder.layers.0.self_attn.q_proj.lora_a: adapter [64 8], model [32 8]"},
		{"both --prompt and --prompt-file", "", []string{"--model", base, "--prompt", "hi", "--prompt-file", blank},
			"generate: give the prompt with --prompt or with --prompt-file, not both"},
		{"empty --prompt", "", []string{"--model", base, "--prompt", ""}, "generate: the prompt (--prompt) is empty"},
		{"blank --prompt-file", "", []string{"--model", base, "--prompt-file", blank}, "generate: the prompt (--prompt-file " + blank + ") is empty"},
		{"empty stdin", "", []string{"--model", base}, "generate: the prompt (stdin) is empty"},
		{"missing --prompt-file", "", []string{"--model", base, "--prompt-file", missing}, `generate: --prompt-file "` + missing + `": not found`},
		{"no model", "", []string{"--prompt", "hi"}, "generate: no model: pass --model DIR (or an --adapter whose adapter_config.json names its base_model)"},
		{"missing adapter", "", []string{"--model", base, "--adapter", missing, "--prompt", "hi"}, `generate: --adapter "` + missing + `": not found`},
		{"broken adapter_config.json", "", []string{"--model", base, "--adapter", broken, "--prompt", "hi"},
			"generate: " + filepath.Join(broken, "adapter_config.json") + ": unexpected end of JSON input"},
		{"--chat --prompt -", "", []string{"--model", base, "--chat", "--prompt", "-"},
			"generate: --chat reads the conversation from stdin, so --prompt - cannot read a prompt from it"},
		{"unknown sampler", "", []string{"--model", base, "--prompt", "hi", "--sampler", "topk"}, `generate: --sampler "topk": want confidence or entropy`},
		{"negative --max-tokens", "", []string{"--model", base, "--prompt", "hi", "--max-tokens", "-1"},
			"generate: --max-tokens -1: want a positive number (0 = the checkpoint's max_new_tokens)"},
		{"--canvas over the model's", "", []string{"--model", base, "--prompt", "hi", "--canvas", "17"}, "generate: --canvas 17: the model's canvas_length is 16"},
		{"mistyped flag", "", []string{"--model", base, "--max-token", "5"}, "generate: unknown flag: --max-token (did you mean --max-tokens?)"},
		{"positional prompt", "", []string{"--model", base, "hi"}, `generate: unknown command "hi" for "generate"`},
	}
	for _, tc := range tests {
		code, stdout, stderr := runCmd(t, tc.stdin, tc.args...)
		if code != 1 || stderr != tc.want+"\n" || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, stderr %q", tc.name, code, stdout, stderr, tc.want)
		}
	}
}

// TestHelp: --help lists every flag with its default.
func TestHelp(t *testing.T) {
	code, stdout, _ := runCmd(t, "", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--model string", "--adapter string", "--prompt string", "--prompt-file string", "--system string",
		"--chat", "--max-tokens int", "--temp float", "--steps int", `--sampler string`, `(default "confidence")`, "--seed uint",
		"--canvas int", "--backend string", `(default "auto")`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q:\n%s", want, stdout)
		}
	}
}

// TestUntilInterruptedPanics: a panic in the work (on its own goroutine, out of cli.Main's
// reach) is still one line and exit 1.
func TestUntilInterruptedPanics(t *testing.T) {
	err := untilInterrupted(context.Background(), func() error { panic("boom") })
	if err == nil || err.Error() != "internal error: boom" {
		t.Errorf("untilInterrupted(panic) = %v, want \"internal error: boom\"", err)
	}
}
