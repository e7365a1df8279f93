package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// run executes the command in-process on the go engine.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(newCommand(), append(args, "--backend", "go"), &out, &errb)
	return code, out.String(), errb.String()
}

// writeModel writes a tiny synthetic checkpoint (bits "0", "4", "8" or "mixed") with a
// byte-level synthetic tokenizer; mutate, if not nil, edits the config first.
func writeModel(t *testing.T, e mx.Engine, dir, bits string, mutate func(*dg.Config)) *dg.Config {
	t.Helper()
	return dgtest.Spec{Preset: dg.PresetTiny, Seed: 3, Bits: bits, Edit: mutate}.Checkpoint(t, e, dir)
}

func loadModel(t *testing.T, e mx.Engine, dir string) *dg.Model {
	t.Helper()
	m, err := dg.Load(e, dir, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writeAdapter attaches a fresh adapter to the model in modelDir, replaces every B by
// uniform entries in ±amp (B = 0 would make the adapter a no-op), writes it in the mlx-lm
// layout to dir and returns it as read back from disk.
func writeAdapter(t *testing.T, e mx.Engine, modelDir, dir string, cfg lora.Config, seed uint64, amp float64) *lora.AdapterFile {
	t.Helper()
	m := loadModel(t, e, modelDir)
	a, err := lora.Attach(m, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	f := a.File(modelDir)
	rng := rand.New(rand.NewPCG(seed, 99))
	for _, mod := range f.ModuleNames() {
		w := f.Modules[mod]
		w.B = mx.MulScalar(mxtest.RandN(e, rng, w.B.Shape()...), amp)
		f.Modules[mod] = w
	}
	if err := f.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := lora.LoadDir(e, dir)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// probeLogits runs Forward on a fixed input (independent of the command's probe input).
func probeLogits(m *dg.Model) []float32 {
	e := m.Engine
	prompt := mx.FromInt32(e, []int32{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12}, 1, 11)
	canvas := mx.FromInt32(e, []int32{5, 9, 300, 4, 1, 1, 77, 450}, 1, 8)
	return m.Forward(prompt, canvas).Float32s()
}

// adaptedLogits mounts the adapters, in order, on a fresh copy of the model.
func adaptedLogits(t *testing.T, e mx.Engine, modelDir string, fs ...*lora.AdapterFile) []float32 {
	t.Helper()
	m := loadModel(t, e, modelDir)
	for _, f := range fs {
		if _, err := lora.Mount(m, f); err != nil {
			t.Fatal(err)
		}
	}
	return probeLogits(m)
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func maxAbs(a []float32) float64 {
	m := 0.0
	for _, v := range a {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := run(t, args...)
	if code != 0 {
		t.Fatalf("export %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
	}
	return out
}

var probeLine = regexp.MustCompile(`max \|logit\| difference fused vs base\+adapter (\S+) \(max \|logit\| (\S+); the adapter moves logits by up to (\S+)\)`)

// reportedDiff parses the probe line of a fuse run.
func reportedDiff(t *testing.T, stdout string) (diff, scale float64) {
	t.Helper()
	m := probeLine.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no probe line in output %q", stdout)
	}
	diff, err1 := strconv.ParseFloat(m[1], 64)
	scale, err2 := strconv.ParseFloat(m[2], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("probe line %q: %v %v", m[0], err1, err2)
	}
	return diff, scale
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExportPEFTRoundTrip(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, ad := filepath.Join(dir, "model"), filepath.Join(dir, "adapter")
	writeModel(t, e, model, "0", nil)
	// rank 4, scale 2: lora_alpha = scale·r = 8, and PEFT's alpha/r = 8/4 gives back 2
	// exactly (powers of two), so the re-imported adapter must compute bit for bit the same.
	f := writeAdapter(t, e, model, ad, lora.Config{Rank: 4, Scale: 2}, 5, 0.1)

	peft := filepath.Join(dir, "out", "peft") // "out" does not exist yet: created on success
	out := mustRun(t, "--adapter", ad, "--format", "peft", "--model", model, "--out", peft)
	if !strings.Contains(out, "peft layout") {
		t.Errorf("stdout %q does not say what was written", out)
	}
	for _, name := range []string{lora.PEFTWeightsFile, lora.ConfigFile} {
		if _, err := os.Stat(filepath.Join(peft, name)); err != nil {
			t.Errorf("PEFT export lacks %s: %v", name, err)
		}
	}
	var pc struct {
		PeftType      string  `json:"peft_type"`
		R             int     `json:"r"`
		LoRAAlpha     float64 `json:"lora_alpha"`
		TargetModules string  `json:"target_modules"`
		BaseModel     string  `json:"base_model_name_or_path"`
	}
	if err := json.Unmarshal(readBytes(t, filepath.Join(peft, lora.ConfigFile)), &pc); err != nil {
		t.Fatal(err)
	}
	if pc.PeftType != "LORA" || pc.R != 4 || pc.LoRAAlpha != 8 || pc.BaseModel != model {
		t.Errorf("adapter_config.json: peft_type %q r %d lora_alpha %g base %q, want LORA 4 8 %q", pc.PeftType, pc.R, pc.LoRAAlpha, pc.BaseModel, model)
	}
	// The default keys, every attention projection and the dense MLP, in both passes.
	for _, key := range []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} {
		for _, name := range []string{"model.decoder.layers.1." + key, "model.encoder.language_model.layers.0." + key} {
			if !regexp.MustCompile(pc.TargetModules).MatchString(name) {
				t.Errorf("target_modules %q does not match %s", pc.TargetModules, name)
			}
		}
	}
	// PEFT stores A transposed, [r, in]: q_proj of layer 0 has in = hidden = 64.
	st, _, err := mx.LoadSafetensors(e, filepath.Join(peft, lora.PEFTWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	qa := st["base_model.model.model.decoder.layers.0.self_attn.q_proj.lora_A.weight"]
	if qa == nil || !slices.Equal(qa.Shape(), []int{4, 64}) {
		t.Fatalf("PEFT q_proj lora_A: %v, want shape [4 64]", qa)
	}

	back, err := lora.LoadDir(e, peft)
	if err != nil {
		t.Fatal(err)
	}
	if back.Scale() != 2 || back.Rank() != 4 {
		t.Errorf("re-imported rank %d scale %g, want 4 and 2", back.Rank(), back.Scale())
	}
	wantL := adaptedLogits(t, e, model, f)
	gotL := adaptedLogits(t, e, model, back)
	if d := maxAbsDiff(gotL, wantL); d != 0 {
		t.Errorf("PEFT export → import: max logit diff %g, want 0 (transposes and alpha/r are exact)", d)
	}
	if base := probeLogits(loadModel(t, e, model)); maxAbsDiff(base, wantL) < 1e-3 {
		t.Fatal("the adapter does not change the logits: the test proves nothing")
	}

	// And back to the mlx layout: the same tensors, bit for bit.
	mlx := filepath.Join(dir, "mlx")
	mustRun(t, "--adapter", peft, "--format", "mlx", "--out", mlx)
	again, err := lora.LoadDir(e, mlx)
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range f.ModuleNames() {
		w, w2 := f.Modules[mod], again.Modules[mod]
		if w2.A == nil || !slices.Equal(w.A.Float32s(), w2.A.Float32s()) || !slices.Equal(w.B.Float32s(), w2.B.Float32s()) {
			t.Fatalf("%s changed through PEFT and back", mod)
		}
	}
	if again.Config.BaseModel != model {
		t.Errorf("mlx re-export base_model %q, want %q (from the PEFT config)", again.Config.BaseModel, model)
	}
}

func TestFuseUnquantized(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, ad, fused := filepath.Join(dir, "model"), filepath.Join(dir, "adapter"), filepath.Join(dir, "fused")
	writeModel(t, e, model, "0", nil)
	f := writeAdapter(t, e, model, ad, lora.Config{Rank: 4, Scale: 2}, 6, 0.1)
	// --model is not needed: the adapter's config names its base.
	out := mustRun(t, "--adapter", ad, "--fuse", "--out", fused)

	for _, name := range []string{"config.json", "generation_config.json", "tokenizer.json", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(fused, name)); err != nil {
			t.Errorf("fused checkpoint lacks %s", name)
		}
	}
	for _, name := range []string{"config.json", "generation_config.json", "tokenizer.json"} {
		if !bytes.Equal(readBytes(t, filepath.Join(fused, name)), readBytes(t, filepath.Join(model, name))) {
			t.Errorf("%s not copied verbatim", name)
		}
	}

	// The fused checkpoint loads with the normal loader and computes base+adapter. Fusing
	// changes float32 summation order only (x·(W + s·(A·B)ᵀ) against x·W + s·(x·A)·B):
	// about 1e-7 relative per linear, amplified by two layers, so 1e-5·max(1, max|logit|).
	want := adaptedLogits(t, e, model, f)
	got := probeLogits(loadModel(t, e, fused))
	tol := 1e-5 * max(1, maxAbs(want))
	if d := maxAbsDiff(got, want); d > tol {
		t.Errorf("fused vs base+adapter: max logit diff %g, want ≤ %g", d, tol)
	}
	diff, scale := reportedDiff(t, out)
	checkReported(t, e, model, fused, f, diff)
	if diff > 1e-5*max(1, scale) {
		t.Errorf("reported probe difference %g, want ≤ 1e-5·max(1, %g)", diff, scale)
	}
	if scale < 1 {
		t.Errorf("reported max |logit| %g: the probe saw no signal", scale)
	}

	// One fused weight by hand: W'[o,i] = W[o,i] + s·Σ_k A[i,k]·B[k,o] (float64).
	base, _, err := mx.LoadSafetensors(e, filepath.Join(model, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	fw, _, err := mx.LoadSafetensors(e, filepath.Join(fused, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	mod := "model.decoder.layers.1.mlp.down_proj" // in = 128 (intermediate), out = 64
	w0, w1 := base[mod+".weight"].Float32s(), fw[mod+".weight"].Float32s()
	a, b := f.Modules[mod].A.Float32s(), f.Modules[mod].B.Float32s()
	const in, outDim, r = 128, 64, 4
	for _, oi := range [][2]int{{0, 0}, {63, 127}, {17, 40}} {
		o, i := oi[0], oi[1]
		s := 0.0
		for k := range r {
			s += float64(a[i*r+k]) * float64(b[k*outDim+o])
		}
		wantW := float64(w0[o*in+i]) + 2*s
		if d := math.Abs(float64(w1[o*in+i]) - wantW); d > 1e-6 {
			t.Errorf("%s.weight[%d,%d] = %v, want %v", mod, o, i, w1[o*in+i], wantW)
		}
	}
	// Modules the adapter does not touch pass through bit for bit.
	for _, name := range []string{"model.decoder.embed_tokens.weight", "model.decoder.layers.0.router.proj.weight"} {
		if !slices.Equal(base[name].Float32s(), fw[name].Float32s()) {
			t.Errorf("%s changed", name)
		}
	}
}

// smoothRouting gives the tiny model 2 experts, both always chosen: top-k routing then
// never flips, so the logits move continuously with the weights and a bound on them
// means something. (With 4 experts, top 2, a rounding-size change can swap an expert and
// move a logit by several units.)
func smoothRouting(c *dg.Config) { c.TextConfig.NumExperts, c.TextConfig.TopKExperts = 2, 2 }

func TestFuseQuantized(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, dense, ad := filepath.Join(dir, "model"), filepath.Join(dir, "dense"), filepath.Join(dir, "adapter")
	cfg := writeModel(t, e, model, "8", smoothRouting)
	// The same draws unquantized (Synthesize draws every tensor before deciding its bits).
	writeModel(t, e, dense, "0", smoothRouting)
	f := writeAdapter(t, e, model, ad, lora.Config{Rank: 4, Scale: 2}, 7, 0.05)
	base := probeLogits(loadModel(t, e, model))
	want := adaptedLogits(t, e, model, f)
	effect := maxAbsDiff(want, base)
	// How far quantizing the whole model at 8 bits moved the logits: the noise scale the
	// fused model is judged against.
	quantErr := maxAbsDiff(probeLogits(loadModel(t, e, dense)), base)
	q := "model.decoder.layers.0.self_attn.q_proj"

	// Re-quantized with the module's own 8 bits: lossy, so the difference is reported and
	// bounded. Fusing re-quantizes only the adapted modules, a subset of what quantizing the
	// model touched; each of their weights lands within ~1.5 steps of its fused value (MLX
	// nudges the scale so that the edge and 0.0 sit on codes, which can shorten the grid by
	// up to a step) instead of half a step, so the fused model stays within 3× the model's
	// own quantization error of base+adapter.
	requant := filepath.Join(dir, "requant")
	out := mustRun(t, "--adapter", ad, "--model", model, "--fuse", "--out", requant)
	diff, _ := reportedDiff(t, out)
	checkReported(t, e, model, requant, f, diff)
	t.Logf("re-quantized fuse: reported %g; quantization error %g, adapter effect %g", diff, quantErr, effect)
	if !(diff > 0 && diff <= 3*quantErr) {
		t.Errorf("reported difference %g, want in (0, %g] (3× the quantization error %g)", diff, 3*quantErr, quantErr)
	}
	if d := maxAbsDiff(probeLogits(loadModel(t, e, requant)), want); d > 3*quantErr {
		t.Errorf("re-quantized fused vs base+adapter: max logit diff %g, want ≤ %g", d, 3*quantErr)
	}
	if quantErr > effect/3 {
		t.Fatalf("quantization error %g is not small against the adapter's effect %g: the bound proves nothing", quantErr, effect)
	}
	if !bytes.Equal(readBytes(t, filepath.Join(requant, "config.json")), readBytes(t, filepath.Join(model, "config.json"))) {
		t.Error("config.json changed although the quantization map did not")
	}
	fw, _, err := mx.LoadSafetensors(e, filepath.Join(requant, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	// 8 bits: in = 64 packs into 64·8/32 = 16 uint32 words per row; group 32 → 2 scales,
	// kept in the checkpoint's bfloat16.
	if w, sc := fw[q+".weight"], fw[q+".scales"]; w.DType() != mx.Uint32 || !slices.Equal(w.Shape(), []int{64, 16}) ||
		sc.DType() != mx.BFloat16 || !slices.Equal(sc.Shape(), []int{64, 2}) {
		t.Errorf("%s not re-quantized at 8 bits, group 32: weight %v %v, scales %v %v", q, w.DType(), w.Shape(), sc.DType(), sc.Shape())
	}

	// --dequantize: adapted modules dense in the scales' dtype (bfloat16), their map entries
	// false; everything else still quantized. bfloat16 keeps 8 significant bits, a
	// relative error of at most 2⁻⁹ per weight, no more than half an 8-bit step of a group
	// spanning zero, so the fused model stays within the quantization error.
	deq := filepath.Join(dir, "deq")
	out = mustRun(t, "--adapter", ad, "--model", model, "--fuse", "--dequantize", "--out", deq)
	ddiff, _ := reportedDiff(t, out)
	checkReported(t, e, model, deq, f, ddiff)
	t.Logf("dequantized fuse: reported %g", ddiff)
	if ddiff > quantErr {
		t.Errorf("dequantized fuse: reported %g, want ≤ %g (the quantization error)", ddiff, quantErr)
	}
	dcfg, err := dg.LoadConfig(deq)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, isQ := dcfg.Quantization.For(q); isQ {
		t.Errorf("%s still quantized in the fused config", q)
	}
	if bits, g, isQ := dcfg.Quantization.For("model.decoder.layers.0.router.proj"); !isQ || bits != 8 || g != cfg.Quantization.GroupSize {
		t.Errorf("router quantization %d/%d/%v, want 8 bits group %d", bits, g, isQ, cfg.Quantization.GroupSize)
	}
	dw, _, err := mx.LoadSafetensors(e, filepath.Join(deq, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if w := dw[q+".weight"]; w.DType() != mx.BFloat16 || !slices.Equal(w.Shape(), []int{64, 64}) || dw[q+".scales"] != nil {
		t.Errorf("%s not stored dense: %v %v", q, w.DType(), w.Shape())
	}
}

// TestFuseQuantized4Bit: the default tiny geometry at 4 bits. Its top-2-of-4 routing
// makes the logits jump when re-quantization swaps an expert, so no tight bound holds
// here; what must hold is that the printed number is the probe's true difference, the
// adapted modules keep their 4-bit packing and everything else passes through byte for
// byte.
func TestFuseQuantized4Bit(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, ad, fused := filepath.Join(dir, "model"), filepath.Join(dir, "adapter"), filepath.Join(dir, "fused")
	writeModel(t, e, model, "4", nil)
	f := writeAdapter(t, e, model, ad, lora.Config{Rank: 4, Scale: 2}, 7, 0.05)
	out := mustRun(t, "--adapter", ad, "--model", model, "--fuse", "--out", fused)
	diff, scale := reportedDiff(t, out)
	checkReported(t, e, model, fused, f, diff)
	if !(diff > 0 && diff < scale) {
		t.Errorf("reported difference %g, want in (0, %g) (the largest logit)", diff, scale)
	}
	base, _, err := mx.LoadSafetensors(e, filepath.Join(model, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	fw, _, err := mx.LoadSafetensors(e, filepath.Join(fused, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fw) != len(base) {
		t.Errorf("fused checkpoint has %d tensors, base %d", len(fw), len(base))
	}
	// 4 bits: in = 64 packs into 64·4/32 = 8 uint32 words per row.
	q := "model.decoder.layers.0.self_attn.q_proj"
	if w := fw[q+".weight"]; w.DType() != mx.Uint32 || !slices.Equal(w.Shape(), []int{64, 8}) {
		t.Errorf("%s: %v %v, want uint32 [64 8]", q, w.DType(), w.Shape())
	}
	for name, a := range base {
		adapted := false
		for mod := range f.Modules {
			adapted = adapted || strings.HasPrefix(name, mod+".")
		}
		if !adapted && !bytes.Equal(mx.Bytes(a), mx.Bytes(fw[name])) {
			t.Errorf("untouched tensor %s changed", name)
		}
	}
}

// forward runs the model on the probe's ids.
func forward(m *dg.Model, prompt, canvas []int32) []float32 {
	e := m.Engine
	return m.Forward(mx.FromInt32(e, prompt, 1, len(prompt)), mx.FromInt32(e, canvas, 1, len(canvas))).Float32s()
}

// checkReported recomputes the command's probe: the same seeded input (seed 0, the
// config default) through base+adapter and the fused checkpoint; the printed value has 6
// significant digits.
func checkReported(t *testing.T, e mx.Engine, model, fused string, f *lora.AdapterFile, reported float64) {
	t.Helper()
	b := loadModel(t, e, model)
	if _, err := lora.Mount(b, f); err != nil {
		t.Fatal(err)
	}
	prompt, canvas := lora.FuseProbeInput(b.Config, 0)
	d := maxAbsDiff(forward(loadModel(t, e, fused), prompt, canvas), forward(b, prompt, canvas))
	if math.Abs(d-reported) > 1e-5*d {
		t.Errorf("reported probe difference %g, recomputed %g", reported, d)
	}
}

func TestMerge(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	writeModel(t, e, model, "0", nil)
	a := writeAdapter(t, e, model, filepath.Join(dir, "a"), lora.Config{Rank: 2, Scale: 2}, 8, 0.1)
	// B adapts only attention, at another rank and scale: the merged file pads its MLP
	// modules with zero columns.
	b := writeAdapter(t, e, model, filepath.Join(dir, "b"), lora.Config{Rank: 3, Scale: 0.5,
		Keys: []string{"self_attn.q_proj", "self_attn.v_proj"}}, 9, 0.2)
	merged := filepath.Join(dir, "merged")
	out := mustRun(t, "--merge", filepath.Join(dir, "a"), filepath.Join(dir, "b"), "--out", merged)
	if !strings.Contains(out, "into rank 5") {
		t.Errorf("stdout %q", out)
	}
	m, err := lora.LoadDir(e, merged)
	if err != nil {
		t.Fatal(err)
	}
	// x·[A1|A2]·[s1·B1; s2·B2] = s1·x·A1·B1 + s2·x·A2·B2: rank 2+3, scale 1.
	if m.Rank() != 5 || m.Scale() != 1 {
		t.Errorf("merged rank %d scale %g, want 5 and 1", m.Rank(), m.Scale())
	}
	stacked := adaptedLogits(t, e, model, a, b)
	got := adaptedLogits(t, e, model, m)
	// Only float32 rounding differs (one matmul over 5 ranks, added once, against two over
	// 2 and 3, added in turn): an ulp or so (6e-8 relative) per linear output, which two
	// layers of attention, norms and experts amplify to ~1e-6 of the largest logit (16
	// ulps of |logit| ≈ 16 measured); 5e-6·max(1, max|logit|) leaves room for that.
	tol := 5e-6 * max(1, maxAbs(stacked))
	if d := maxAbsDiff(got, stacked); d > tol {
		t.Errorf("merged vs both adapters applied: max logit diff %g, want ≤ %g", d, tol)
	}
	if base := probeLogits(loadModel(t, e, model)); maxAbsDiff(base, stacked) < 1e3*tol {
		t.Fatal("the adapters barely change the logits: the test proves nothing")
	}

	// The merged adapter also exports as PEFT.
	mp := filepath.Join(dir, "merged-peft")
	mustRun(t, "--merge", filepath.Join(dir, "a"), filepath.Join(dir, "b"), "--format", "peft", "--out", mp)
	back, err := lora.LoadDir(e, mp)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(adaptedLogits(t, e, model, back), got); d != 0 {
		t.Errorf("merged PEFT vs merged mlx: max logit diff %g, want 0", d)
	}
}

func TestBadInput(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, ad := filepath.Join(dir, "model"), filepath.Join(dir, "adapter")
	writeModel(t, e, model, "0", nil)
	writeAdapter(t, e, model, ad, lora.Config{Rank: 2, Scale: 2}, 10, 0.1)
	// An adapter trained on another geometry: intermediate 96 instead of 128, so every MLP
	// module's A or B is misshapen for the tiny model.
	other, otherAd := filepath.Join(dir, "other"), filepath.Join(dir, "other-adapter")
	writeModel(t, e, other, "0", func(c *dg.Config) { c.TextConfig.IntermediateSize = 96 })
	writeAdapter(t, e, other, otherAd, lora.Config{Rank: 2, Scale: 2}, 11, 0.1)
	// A model directory without its tokenizer, and an adapter without its config.
	noTok := filepath.Join(dir, "notok")
	writeModel(t, e, noTok, "0", nil)
	os.Remove(filepath.Join(noTok, "tokenizer.json"))
	noCfg := filepath.Join(dir, "nocfg")
	os.MkdirAll(noCfg, 0o755)
	os.WriteFile(filepath.Join(noCfg, lora.AdaptersFile), readBytes(t, filepath.Join(ad, lora.AdaptersFile)), 0o644)
	full := filepath.Join(dir, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644)

	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"fuse another geometry", []string{"--adapter", otherAd, "--model", model, "--fuse", "--force-base"},
			"mlp.gate_proj.lora_b: adapter [2 96], model [2 128]"},
		{"fuse into another base", []string{"--adapter", ad, "--model", noTok, "--fuse"},
			"--model " + noTok + " is not the adapter's base_model " + model + ": fusing into another base of the same shape gives a model that is neither; pass --force-base"},
		{"force-base without fuse", []string{"--adapter", ad, "--format", "peft", "--force-base"}, "--force-base only applies to --fuse"},
		{"adapter file not safetensors", []string{"--adapter", filepath.Join(ad, lora.ConfigFile), "--format", "peft"},
			"want an adapter directory or a .safetensors adapter file"},
		{"peft another geometry", []string{"--adapter", otherAd, "--model", model, "--format", "peft"},
			"does not fit the model"},
		{"merge another geometry", []string{"--merge", ad, otherAd},
			"disagree on module shapes"},
		{"missing adapter", []string{"--adapter", filepath.Join(dir, "nope"), "--format", "peft"},
			`adapter "` + filepath.Join(dir, "nope") + `": not found`},
		{"adapter without config", []string{"--adapter", noCfg, "--format", "peft"},
			"neither adapter_config.json nor optiq_lora_config.json"},
		{"missing model", []string{"--adapter", ad, "--model", filepath.Join(dir, "nope"), "--fuse", "--force-base"},
			"model directory " + filepath.Join(dir, "nope") + " does not exist"},
		{"model without tokenizer", []string{"--adapter", ad, "--model", noTok, "--fuse", "--force-base"},
			"has no tokenizer.json"},
		{"out not empty", []string{"--adapter", ad, "--format", "peft", "--out", full},
			"exists and is not empty"},
		{"no mode", []string{"--adapter", ad}, "nothing to do"},
		{"bad format", []string{"--adapter", ad, "--format", "onnx"}, `--format "onnx"`},
		{"merge one adapter", []string{"--merge", ad}, "--merge takes two adapter directories"},
		{"dequantize without fuse", []string{"--adapter", ad, "--format", "peft", "--dequantize"}, "--dequantize only applies to --fuse"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"), "x")
			args := tc.args
			if !slices.Contains(args, "--out") {
				args = append(slices.Clone(args), "--out", out)
			}
			code, stdout, stderr := run(t, args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1 (stderr %q)", code, stderr)
			}
			if !strings.Contains(stderr, tc.stderr) || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "export: ") {
				t.Errorf("stderr %q, want one line \"export: ...\" containing %q", stderr, tc.stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if _, err := os.Stat(filepath.Dir(out)); err == nil {
				t.Errorf("%s was created although the export failed", filepath.Dir(out))
			}
		})
	}
	// Nothing half-written anywhere: no staging directories left, the full --out untouched.
	entries, _ := os.ReadDir(dir)
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), ".") {
			t.Errorf("left over %s", en.Name())
		}
	}
	if got, _ := os.ReadDir(full); len(got) != 1 {
		t.Errorf("the non-empty --out now holds %d entries", len(got))
	}
}

// TestConfigFile: export reads the shared config — model, adapter_path and seed — like
// train and eval.
func TestConfigFile(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, ad := filepath.Join(dir, "model"), filepath.Join(dir, "adapter")
	writeModel(t, e, model, "0", nil)
	f := writeAdapter(t, e, model, ad, lora.Config{Rank: 2, Scale: 2}, 12, 0.1)
	yaml := filepath.Join(dir, "lora.yaml")
	if err := os.WriteFile(yaml, []byte("model: "+model+"\nadapter_path: "+ad+"\nseed: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fused := filepath.Join(dir, "fused")
	out := mustRun(t, "--config", yaml, "--fuse", "--out", fused)
	if !strings.Contains(out, "seed 5") {
		t.Errorf("stdout %q does not name the probe seed 5", out)
	}
	diff, _ := reportedDiff(t, out)
	b := loadModel(t, e, model)
	if _, err := lora.Mount(b, f); err != nil {
		t.Fatal(err)
	}
	prompt, canvas := lora.FuseProbeInput(b.Config, 5)
	if d := maxAbsDiff(forward(loadModel(t, e, fused), prompt, canvas), forward(b, prompt, canvas)); math.Abs(d-diff) > 1e-5*d {
		t.Errorf("reported %g, recomputed on the seed-5 probe %g", diff, d)
	}
}
