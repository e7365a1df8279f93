package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/mx/safetensors"
)

// probe runs the command in-process and returns stdout, stderr and the exit code.
func probe(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(newCommand(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func mustProbe(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := probe(t, args...)
	if code != 0 {
		t.Fatalf("probe %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

func TestMkmodelReal(t *testing.T) {
	dir := t.TempDir()
	out := mustProbe(t, "mkmodel", "--preset", "real", "--out", dir)
	// Counts from CountParams on the real geometry (tensors_test.go derives them).
	if !strings.Contains(out, "25250986812 parameters") || !strings.Contains(out, "3840375612 active per token") {
		t.Fatalf("output %q lacks the real parameter counts", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); !os.IsNotExist(err) {
		t.Fatalf("real preset wrote weights (stat err %v)", err)
	}
	c, err := dg.LoadConfig(dir)
	if err != nil {
		t.Fatalf("written config does not load: %v", err)
	}
	if c.Quantization != nil {
		t.Errorf("--bits 0 (the default) wrote a quantization map %+v", c.Quantization)
	}
}

// TestMkmodelRealBits: --preset real honours --bits in the config it writes (no weights
// without --sharded), so probe estimate --model on it predicts the 4-bit checkpoint — the
// same as --preset real --bits 4 — instead of the float32 one (about 94 GiB of weights).
func TestMkmodelRealBits(t *testing.T) {
	for _, bits := range []string{dg.Bits4, dg.Bits8, dg.BitsMixed} {
		dir := t.TempDir()
		out := mustProbe(t, "mkmodel", "--preset", "real", "--bits", bits, "--out", dir)
		if !strings.Contains(out, "wrote "+dir+" (config only, bits "+bits+";") {
			t.Errorf("output %q", out)
		}
		if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); !os.IsNotExist(err) {
			t.Fatalf("real preset wrote weights (stat err %v)", err)
		}
		c, err := dg.LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		want, err := dg.QuantizationPolicy(c, bits)
		if err != nil {
			t.Fatal(err)
		}
		if c.Quantization == nil || c.Quantization.Bits != want.Bits || c.Quantization.GroupSize != 64 || len(c.Quantization.Modules) != len(want.Modules) {
			t.Errorf("bits %s: quantization %+v, want %+v", bits, c.Quantization, want)
		}
		args := []string{"--rank", "8", "--prompt-len", "512", "--canvas-len", "256"}
		fromModel := mustProbe(t, append([]string{"estimate", "--model", dir}, args...)...)
		fromPreset := mustProbe(t, append([]string{"estimate", "--preset", "real", "--bits", bits}, args...)...)
		if fromModel != fromPreset {
			t.Errorf("bits %s: estimate --model differs from --preset real --bits:\n%s\n%s", bits, fromModel, fromPreset)
		}
		// The 4-bit checkpoint (bfloat16 scales, as mkmodel writes it) is 14,204,691,064 B
		// mapped in place; the float32 copies of its scales come on top.
		if bits == dg.Bits4 && !strings.Contains(fromModel, "of which mapped from the checkpoint (not Go heap)        13.2 GiB") {
			t.Errorf("4-bit real checkpoint not 13.2 GiB mapped:\n%s", fromModel)
		}
	}
	if _, _, code := probe(t, "mkmodel", "--preset", "real", "--bits", "3", "--out", t.TempDir()); code != 1 {
		t.Errorf("--bits 3 on real: exit %d, want 1", code)
	}
}

func TestMkmodelTokenizeTemplate(t *testing.T) {
	dir := t.TempDir()
	mustProbe(t, "mkmodel", "--preset", "tiny", "--seed", "3", "--bits", "4", "--out", dir)
	e := mxtest.Go(t)
	if _, err := dg.Load(e, dir, dg.LoadOptions{}); err != nil {
		t.Fatalf("mkmodel checkpoint does not load: %v", err)
	}
	// Byte fallback: "é" is not in the tiny vocabulary's merges, so it encodes as bytes
	// 0xC3 0xA9 → ids 108+0xC3, 108+0xA9 (the synthetic layout puts <0x00> at 108).
	var ids []int32
	if err := json.Unmarshal([]byte(mustProbe(t, "tokenize", "--model", dir, "--text", "é")), &ids); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != 108+0xC3 || ids[1] != 108+0xA9 {
		t.Fatalf("tokenize é = %v, want [%d %d]", ids, 108+0xC3, 108+0xA9)
	}
	if got := strings.TrimSpace(mustProbe(t, "tokenize", "--model", dir, "--ids", "175,172")); got != "C@" {
		t.Fatalf("decode = %q, want %q", got, "C@") // 175-108 = 0x43 'C', 172-108 = 0x40 '@'
	}
	msgs := filepath.Join(t.TempDir(), "m.json")
	os.WriteFile(msgs, []byte(`[{"role":"user","content":"hi"}]`), 0o644)
	if err := json.Unmarshal([]byte(mustProbe(t, "template", "--model", dir, "--messages", msgs, "--generation-prompt")), &ids); err != nil {
		t.Fatal(err)
	}
	// <bos> <|turn> user \n hi <turn|> \n <|turn> model \n <|channel> thought \n <channel|>
	if ids[0] != 2 || ids[1] != 105 || ids[len(ids)-1] != 101 {
		t.Fatalf("template ids %v: want to start 2, 105 and end with 101", ids)
	}
}

func TestForwardContract(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	mustProbe(t, "mkmodel", "--preset", "tiny", "--seed", "5", "--out", dir)
	m, err := dg.Load(e, dir, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.Attach(m, lora.Config{Rank: 2, Scale: 4}, 9)
	if err != nil {
		t.Fatal(err)
	}
	// A non-zero B so the adapter's gradients are not trivially zero for A.
	p := a.Params()
	for n, v := range p {
		if strings.HasSuffix(n, ".lora_b") {
			p[n] = mx.MulScalar(mx.AddScalar(mx.ZerosLike(v), 0.01), 1)
		}
	}
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
	adir := t.TempDir()
	if err := lora.Save(adir, a, nil); err != nil {
		t.Fatal(err)
	}
	if err := lora.WriteConfig(adir, lora.NewAdapterConfig(a.Config(), dir)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "f.safetensors")
	mustProbe(t, "forward", "--model", dir, "--prompt", "2,105,7,8", "--canvas", "5,9,300,4", "--adapter", adir,
		"--target", "6,9,301,1", "--corrupt", "1,0,1,1", "--backend", "go", "--out", out)
	got, _, err := mx.LoadSafetensors(e, out)
	if err != nil {
		t.Fatal(err)
	}
	if s := got["logits"].Shape(); len(s) != 3 || s[0] != 1 || s[1] != 4 || s[2] != 512 || got["logits"].DType() != mx.Float32 {
		t.Fatalf("logits %v %s, want [1 4 512] float32", s, got["logits"].DType())
	}
	if s := got["loss"].Shape(); len(s) != 1 || s[0] != 1 {
		t.Fatalf("loss shape %v, want [1]", s)
	}
	// Every adapter tensor has a gradient of its own shape, and the loss is the mean CE
	// over the 3 corrupted positions, recomputed here from the dumped logits.
	for n, v := range a.Params() {
		g, ok := got["grad."+n]
		if !ok || !equal(g.Shape(), v.Shape()) {
			t.Fatalf("grad.%s missing or misshapen", n)
		}
	}
	lv := got["logits"].Float32s()
	want := 0.0
	for i, tgt := range []int{6, 9, 301, 1} {
		if i == 1 {
			continue // not corrupted
		}
		row := lv[i*512 : (i+1)*512]
		mx_ := float64(row[0])
		for _, x := range row {
			mx_ = max(mx_, float64(x))
		}
		s := 0.0
		for _, x := range row {
			s += exp(float64(x) - mx_)
		}
		want += mx_ + log(s) - float64(row[tgt])
	}
	want /= 3
	if d := got["loss"].Item() - want; d > 1e-4 || d < -1e-4 {
		t.Fatalf("loss %v, recomputed %v", got["loss"].Item(), want)
	}
}

func TestForwardBadInput(t *testing.T) {
	dir := t.TempDir()
	mustProbe(t, "mkmodel", "--preset", "tiny", "--out", dir)
	out := filepath.Join(t.TempDir(), "f.safetensors")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--canvas", "1,x"}, `"x" is not an integer`},
		{[]string{"--canvas", "1,999"}, "out of range"},
		{[]string{"--canvas", "1,2", "--target", "1", "--corrupt", "1,0"}, "must match the canvas"},
		{[]string{"--canvas", "1,2", "--target", "1,2", "--corrupt", "1,2"}, "want 0 or 1"},
		{[]string{"--canvas", ""}, "at least one id"},
	}
	for _, c := range cases {
		args := append([]string{"forward", "--model", dir, "--prompt", "2", "--out", out}, c.args...)
		_, errs, code := probe(t, args...)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("probe %v: exit %d, stderr %q; want exit 1 and one line containing %q", c.args, code, errs, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("probe %v wrote %s", c.args, out)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	dir := t.TempDir()
	mustProbe(t, "mkmodel", "--preset", "tiny", "--out", dir)
	out := mustProbe(t, "bench", "--model", dir, "--prompt-len", "8", "--canvas-len", "8", "--steps", "2", "--backend", "go", "--rank", "4", "--json")
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench output %q is not JSON: %v", out, err)
	}
	for _, k := range []string{"tokens_per_sec", "ms_per_step", "peak_rss_bytes", "trainable_params", "backend"} {
		if _, ok := r[k]; !ok {
			t.Errorf("bench JSON lacks %q", k)
		}
	}
	// The timing fields are measured, so only their consistency is exact: tokens/s is
	// (N+L)·steps over the timed seconds and ms/step is those seconds over steps, so
	// tokens/s · ms/step = 1000·(N+L) = 16000.
	tps, _ := r["tokens_per_sec"].(float64)
	ms, _ := r["ms_per_step"].(float64)
	if !(tps > 0) || !(ms > 0) || math.Abs(tps*ms-16000) > 1e-6*16000 {
		t.Errorf("tokens_per_sec %v, ms_per_step %v: want both positive with product 1000·(8+8) = 16000", r["tokens_per_sec"], r["ms_per_step"])
	}
	if rss, _ := r["peak_rss_bytes"].(float64); runtime.GOOS == "linux" && rss < 1<<20 {
		t.Errorf("peak_rss_bytes %v: a Go process that loaded a model holds more than 1 MiB", r["peak_rss_bytes"])
	}
	for k, want := range map[string]float64{"prompt_len": 8, "canvas_len": 8, "steps": 2, "rank": 4} {
		if r[k] != want {
			t.Errorf("%s = %v, want %v", k, r[k], want)
		}
	}
	// Rank 4 on the tiny model, Σ 4·(in+out): the sliding layer's q 64+64, k 64+32, v 64+32,
	// o 64+64, gate/up/down 3·(64+128) = 1024; the full layer's q 64+128, k 64+32, o 128+64,
	// gate/up/down 576 = 1056; 4·(1024+1056) = 8320.
	if r["trainable_params"].(float64) != 8320 || r["backend"] != "go" {
		t.Errorf("trainable_params %v backend %v, want 8320 go", r["trainable_params"], r["backend"])
	}
	// The go engine works while the graph is built: nothing to look ahead of.
	if _, ok := r["lookahead"]; ok {
		t.Errorf("go engine bench reports lookahead %v", r["lookahead"])
	}
}

// TestBenchLoRAKeys: --lora-keys adapts only the linears named (and the JSON says
// which); a key that is not a layer's linear is one clear error.
func TestBenchLoRAKeys(t *testing.T) {
	dir := t.TempDir()
	mustProbe(t, "mkmodel", "--preset", "tiny", "--out", dir)
	out := mustProbe(t, "bench", "--model", dir, "--prompt-len", "8", "--canvas-len", "8", "--steps", "1", "--backend", "go",
		"--rank", "4", "--lora-keys", "self_attn.q_proj,mlp.down_proj", "--json")
	var r struct {
		Trainable int64    `json:"trainable_params"`
		Keys      []string `json:"lora_keys"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench output %q is not JSON: %v", out, err)
	}
	// Rank 4: q 64+64 and down 128+64 in the sliding layer, q 64+128 and down 128+64 in
	// the full one: 4·(128+192+192+192) = 2816.
	if r.Trainable != 2816 || !slices.Equal(r.Keys, []string{"self_attn.q_proj", "mlp.down_proj"}) {
		t.Errorf("trainable_params %d, lora_keys %v; want 2816 and [self_attn.q_proj mlp.down_proj]", r.Trainable, r.Keys)
	}
	_, errs, code := probe(t, "bench", "--model", dir, "--steps", "1", "--backend", "go", "--lora-keys", "self_attn.nope")
	if code != 1 || !strings.Contains(errs, `lora key "self_attn.nope" is not a linear of a decoder layer`) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("bad key: exit %d, stderr %q; want exit 1 and one line naming the key", code, errs)
	}
}

func TestMkdataDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	mustProbe(t, "mkdata", "--task", "shift", "--seed", "4", "--train", "5", "--valid", "2", "--test", "2", "--out", a)
	mustProbe(t, "mkdata", "--task", "shift", "--seed", "4", "--train", "5", "--valid", "2", "--test", "2", "--out", b)
	x, _ := os.ReadFile(filepath.Join(a, "train.jsonl"))
	y, _ := os.ReadFile(filepath.Join(b, "train.jsonl"))
	if !bytes.Equal(x, y) || len(x) == 0 {
		t.Fatal("same seed gave different data")
	}
	var row struct{ Prompt, Completion string }
	json.Unmarshal(bytes.SplitN(x, []byte("\n"), 2)[0], &row)
	// shift maps each letter of the word after "shift: " to the next letter (h wraps to a).
	word := strings.TrimPrefix(row.Prompt, "shift: ")
	for i := range word {
		want := "abcdefgh"[(strings.IndexByte("abcdefgh", word[i])+1)%8]
		if row.Completion[i] != want {
			t.Fatalf("shift(%q) = %q", word, row.Completion)
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEstimate(t *testing.T) {
	out := mustProbe(t, "estimate", "--preset", "real", "--bits", "4", "--rank", "8", "--prompt-len", "512", "--canvas-len", "256")
	// 205 adapted linears and 9,292,800 LoRA parameters at rank 8 (spec §5.3).
	if !strings.Contains(out, "205 linears (9292800 params)") || !strings.Contains(out, "total") {
		t.Fatalf("estimate output:\n%s", out)
	}
	if _, _, code := probe(t, "estimate"); code != 1 {
		t.Fatalf("estimate without --model/--preset: exit %d, want 1", code)
	}
	// --json, with and without grad_checkpoint: the checkpointed step keeps far less, and
	// the mapped 4-bit codes are most of the weights.
	var plain, ckpt map[string]any
	args := []string{"estimate", "--preset", "real", "--bits", "4", "--prompt-len", "512", "--canvas-len", "256", "--json"}
	if err := json.Unmarshal([]byte(mustProbe(t, args...)), &plain); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(mustProbe(t, append(args, "--grad-checkpoint")...)), &ckpt); err != nil {
		t.Fatal(err)
	}
	if ckpt["grad_checkpoint"] != true || ckpt["total_bytes"].(float64) >= plain["total_bytes"].(float64)/2 ||
		plain["mapped_weights_bytes"].(float64) < 0.8*plain["weights_bytes"].(float64) {
		t.Fatalf("estimate --json: plain %v, checkpointed %v", plain, ckpt)
	}
}

// TestMkmodelShardedBF16: --sharded --bits 0 --hf-layout writes the release's layout —
// bfloat16 layer shards, the experts without ".weight" — which loads; --hf-layout alone is
// refused before anything is written.
func TestMkmodelShardedBF16(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bf16")
	out := mustProbe(t, "mkmodel", "--preset", "tiny", "--bits", "0", "--sharded", "--hf-layout", "--seed", "2", "--out", dir)
	if !strings.Contains(out, "3 shards, 51 tensors") {
		t.Fatalf("output %q, want 3 shards, 51 tensors", out)
	}
	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for name, want := range map[string]safetensors.DType{
		dg.LayerPrefix(0) + ".experts.gate_up_proj":    safetensors.BF16,
		dg.LayerPrefix(0) + ".self_attn.q_proj.weight": safetensors.BF16,
		dg.DecoderPrefix + ".norm.weight":              safetensors.BF16,
	} {
		if info, ok := ck.Info(name); !ok || info.DType != want {
			t.Errorf("%s: %+v (present %v), want %s", name, info, ok, want)
		}
	}
	if _, err := dg.Load(mxtest.Go(t), dir, dg.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	_, errs, code := probe(t, "mkmodel", "--preset", "tiny", "--bits", "4", "--sharded", "--hf-layout", "--out", bad)
	if code != 1 || errs != "probe: --hf-layout writes the unquantized release layout: it needs --sharded --bits 0\n" {
		t.Errorf("--hf-layout with --bits 4: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("refused run wrote %s", bad)
	}
}

// TestMkmodelSharded: --sharded writes layer shards that probe bench trains on.
func TestMkmodelSharded(t *testing.T) {
	dir := t.TempDir()
	out := mustProbe(t, "mkmodel", "--preset", "tiny", "--bits", "4", "--sharded", "--seed", "2", "--out", dir)
	if !strings.Contains(out, "3 shards") {
		t.Fatalf("output %q, want 3 shards (2 layers + globals)", out)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(mustProbe(t, "bench", "--model", dir, "--prompt-len", "8", "--canvas-len", "8", "--steps", "1", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res["tokens_per_sec"].(float64) <= 0 {
		t.Fatalf("bench on the sharded checkpoint: %v", res)
	}
}
