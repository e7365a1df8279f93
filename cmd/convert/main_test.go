package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/internal/cli"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
)

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(newCommand(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeModel writes a tiny bf16 checkpoint in the release layout.
func writeModel(t *testing.T, dir string) string {
	t.Helper()
	dgtest.Tiny(1, dg.BitsNone).Release(t, dir)
	return dir
}

func TestConvertCommand(t *testing.T) {
	dir := t.TempDir()
	model := writeModel(t, filepath.Join(dir, "bf16"))
	out := filepath.Join(dir, "q4")
	code, stdout, stderr := runMain("--model", model, "--out", out, "--bits", "mixed", "--group-size", "32", "--keep", "self_attn.o_proj")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// tiny has 23 quantizable modules (embedding, 3 self-conditioning linears, 10 in the
	// sliding layer 0, 9 in the full layer 1 without v_proj); --keep leaves the 2 o_proj.
	// Tensors: the 51 of the tensor table plus scales and biases of the 21 = 93.
	want := regexp.MustCompile(`^wrote ` + regexp.QuoteMeta(out) + `: bits mixed, group size 32, 21 modules quantized, 93 tensors in 1 shard\(s\), [0-9.]+ GB \([0-9.]+ bits per weight; input [0-9.]+ GB\), unquantized tensors bfloat16, in [0-9.]+ s, peak RSS [0-9.]+ GB\n` +
		`  kept model\.decoder\.layers\.0\.self_attn\.o_proj \(--keep self_attn\.o_proj\)\n  kept model\.decoder\.layers\.1\.self_attn\.o_proj \(--keep self_attn\.o_proj\)\n$`)
	if !want.MatchString(stdout) {
		t.Errorf("stdout %q, want %s", stdout, want)
	}
	if !strings.Contains(stderr, "convert 0.00/0.00 GB (100%)") {
		t.Errorf("stderr %q lacks the final progress line", stderr)
	}
	cfg, err := dg.LoadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if b, g, ok := cfg.Quantization.For(dg.LayerPrefix(0) + ".self_attn.q_proj"); !ok || b != 8 || g != 64 {
		t.Errorf("mixed q_proj: bits %d group %d quantized %v, want 8 at 64", b, g, ok)
	}
}

// TestBadInput: each bad invocation exits 1 with one exact line and writes nothing.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	model := writeModel(t, filepath.Join(dir, "bf16"))
	existing := filepath.Join(dir, "existing")
	if err := os.MkdirAll(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	quantized := filepath.Join(dir, "q")
	cfg, _ := dg.Preset(dg.PresetTiny)
	if _, err := dg.WriteSyntheticShards(quantized, cfg, 1, dg.Bits4, nil); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken")
	writeModel(t, broken)
	if err := os.Rename(filepath.Join(broken, "config.json"), filepath.Join(broken, "config.json.bak")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--out", out}, "convert: --model is required"},
		{[]string{"--model", model}, "convert: --out is required"},
		{[]string{"--model", model, "--out", out, "--bits", "3"}, `convert: --bits: quantization recipe: bits "3": want 4, 8 or mixed`},
		{[]string{"--model", model, "--out", out, "--group-size", "48"}, "convert: --group-size: quantization recipe: group size 48: want 32, 64 or 128"},
		{[]string{"--model", model, "--out", out, "--keep", "[x"}, `convert: --keep: quantization recipe: keep pattern "[x": syntax error in pattern`},
		{[]string{"--model", model, "--out", out, "--keep", "q_porj"}, `convert: convert ` + model + `: quantization recipe: keep pattern "q_porj" matches no quantizable module (patterns name modules such as model.decoder.layers.0.self_attn.q_proj or embed_tokens)`},
		{[]string{"--model", model, "--out", out, "--dtype", "float64"}, `convert: --dtype "float64" is not bfloat16, float16 or float32`},
		{[]string{"--model", model, "--out", out, "--max-shard-gb", "0"}, "convert: --max-shard-gb 0: want a positive size"},
		{[]string{"--model", model, "--out", existing}, "convert: --out " + existing + " already exists; pass --overwrite to replace it"},
		{[]string{"--model", model, "--out", filepath.Join(model, "q4")}, "convert: --out " + filepath.Join(model, "q4") + " is the input checkpoint or inside it; write the conversion elsewhere"},
		{[]string{"--model", quantized, "--out", out}, "convert: --model " + quantized + " is already quantized (its config.json has a quantization map, bits 4); convert reads bf16, f16 or f32 checkpoints"},
		{[]string{"--model", broken, "--out", out}, "convert: diffusiongemma: read config: open " + filepath.Join(broken, "config.json") + ": no such file or directory"},
		{[]string{"--model", model, "--out", out, "--backend", "tpu"}, ""},
	}
	for _, tc := range tests {
		code, stdout, stderr := runMain(tc.args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 1 || stdout != "" || len(lines) != 1 || (tc.want != "" && lines[0] != tc.want) || (tc.want == "" && !strings.HasPrefix(lines[0], "convert: ")) {
			t.Errorf("convert %q: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, code, stdout, stderr, tc.want)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if name := e.Name(); name != "bf16" && name != "existing" && name != "q" && name != "broken" {
				t.Errorf("convert %q left %s behind", tc.args, name)
				os.RemoveAll(filepath.Join(dir, name))
			}
		}
		if entries, _ := os.ReadDir(existing); len(entries) != 0 {
			t.Errorf("convert %q wrote into %s", tc.args, existing)
		}
	}
}

// TestMismatchedCheckpoint: a checkpoint whose tensors do not fit its config is refused
// before anything is written, naming the tensor.
func TestMismatchedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	model := writeModel(t, filepath.Join(dir, "bf16"))
	cfgPath := filepath.Join(model, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// One more layer in the config than in the weights.
	b = bytes.Replace(b, []byte(`"num_hidden_layers": 2`), []byte(`"num_hidden_layers": 3`), 1)
	b = bytes.Replace(b, []byte(`"sliding_attention",`+"\n"+`      "full_attention"`), []byte(`"sliding_attention",`+"\n"+`      "sliding_attention",`+"\n"+`      "full_attention"`), 1)
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, _, stderr := runMain("--model", model, "--out", out)
	if code != 1 || !strings.HasPrefix(stderr, "convert: convert "+model+": checkpoint does not match its config: missing tensor model.encoder.language_model.layers.2.layer_scalar; ") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("refused conversion wrote %s", out)
	}
}
