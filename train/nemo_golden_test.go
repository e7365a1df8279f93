package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
	"github.com/dgtune/dgtune/tokenizer"
)

// NeMo AutoModel's own functions at 36044ad (interop/nemo_golden.py, run once on the device
// machine with torch 2.11 and transformers 5.17) on the demo base and its tokenizer, with
// the demo's canvas of 16 for NeMo's 256 and seq_length 64 for its 1024.
const (
	nemoGolden    = "../interop/testdata/nemo/golden.json"
	nemoRows      = "../interop/testdata/nemo/rows.jsonl"
	demoBase      = "../demo/base"
	nemoBlock     = 16
	nemoSeqLength = 64
)

type nemoExample struct {
	Rank, Row, Prefix, Length, Block int
	MicroBatch                       int `json:"micro_batch"`
	Clean, Noisy                     []int32
	NoiseMask                        []int32 `json:"noise_mask"`
	CanvasIDs                        []int32 `json:"canvas_ids"`
	TargetIDs                        []int32 `json:"target_ids"`
	CanvasLossMask                   []int   `json:"canvas_loss_mask"`
	SelfConditioning                 bool    `json:"self_conditioning"`
	DiffusionLoss                    float64 `json:"diffusion_loss"`
	EncoderLoss                      float64 `json:"encoder_loss"`
	Loss                             float64 `json:"loss"`
	DiffusionCESum                   float64 `json:"diffusion_ce_sum"`
	EncoderCESum                     float64 `json:"encoder_ce_sum"`
}

type nemoStep struct {
	NumDiffusionTokens float64 `json:"num_diffusion_tokens"`
	NumARTokens        float64 `json:"num_ar_tokens"`
	Examples           []nemoExample
	TotalLoss          float64 `json:"total_loss"`
}

type nemoGoldenFile struct {
	Chat struct {
		EOSTokenID int32 `json:"eos_token_id"`
		Rows       []struct {
			Rendered      string
			InputIDs      []int32 `json:"input_ids"`
			LossMask      []int   `json:"loss_mask"`
			AttentionMask []int   `json:"attention_mask"`
		}
	}
	Xavier []struct {
		In, Rank    int
		Scale       float64
		N           float64
		Mean, Std   float64
		ExpectedStd float64 `json:"expected_std"`
		BMaxAbs     float64 `json:"b_max_abs"`
	}
	Reduction    nemoStep
	Transformers nemoStep
}

func readNeMoGolden(t *testing.T) nemoGoldenFile {
	t.Helper()
	b, err := os.ReadFile(nemoGolden)
	if err != nil {
		t.Fatal(err)
	}
	var g nemoGoldenFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// nemoDataConfig is chat_template nemo as recipe: nemo sets it, on the demo's geometry.
func nemoDataConfig(t *testing.T) config.Config {
	t.Helper()
	c, err := config.Load(writeRecipeYAML(t, fmt.Sprintf("recipe: nemo\nmodel: %s\nmax_canvas: %d\nmax_seq_length: %d\nbackend: go\n",
		demoBase, nemoBlock, nemoSeqLength)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeRecipeYAML(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// chat_template nemo gives NeMo's ChatDataset + DLLMCollator token ids and supervision on
// the same rows: the prompt is every position before the first supervised one, the target
// every supervised one up to the end of the attended positions (response, then the EOS fill),
// nothing supervised after — system turn, whitespace trimmed, an earlier model turn's thought
// channel stripped, only the last turn supervised, bytes outside the vocabulary, a response
// cut by seq_length, an EOS fill cut by it (a partial last canvas).
func TestNeMoChatTemplateMatchesNeMo(t *testing.T) {
	g := readNeMoGolden(t)
	cfg := nemoDataConfig(t)
	tok, err := tokenizer.Load(filepath.Join(demoBase, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	mc, err := dg.LoadConfig(demoBase)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := session.NewEncoder(cfg, tok, mc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	raw, err := os.ReadFile(nemoRows)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "train.jsonl"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := data.Load(dir, session.DataOptions(cfg), data.Need{Required: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Train.Examples) != len(g.Chat.Rows) {
		t.Fatalf("%d rows here, %d in the golden file", len(ds.Train.Examples), len(g.Chat.Rows))
	}
	if eos, _ := tok.TokenID("<eos>"); eos != g.Chat.EOSTokenID {
		t.Fatalf("NeMo filled with %d, the tokenizer's <eos> is %d", g.Chat.EOSTokenID, eos)
	}
	for i, row := range g.Chat.Rows {
		// The golden row's own shape: 0…0 1…1 over the attended positions, 0 after.
		length := 0
		for _, a := range row.AttentionMask {
			length += a
		}
		prefix := slices.Index(row.LossMask, 1)
		for j, m := range row.LossMask {
			if want := j >= prefix && j < length; (m == 1) != want {
				t.Fatalf("row %d: NeMo's loss_mask is not one run [%d, %d): %v", i, prefix, length, row.LossMask)
			}
		}
		prompt, target, err := enc(ds.Train.Examples[i])
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		got := append(slices.Clone(prompt), target...)
		if !slices.Equal(got, row.InputIDs[:length]) || len(prompt) != prefix {
			t.Errorf("row %d (%q):\nprompt+target %v (prompt %d)\nNeMo          %v (prompt %d)", i, row.Rendered, got, len(prompt), row.InputIDs[:length], prefix)
		}
	}
}

// NeMo's LoRA init (lora_A_init xavier): A ~ N(0, 2/(in + rank)), B = 0. dgtune's draw on
// the demo base's linears has that standard deviation, as NeMo's draw on the same shapes
// has, within their sampling error; it is √(6·in/(in+r)) ≈ 2.2 times kaiming_uniform's.
func TestXavierInitMatchesNeMo(t *testing.T) {
	g := readNeMoGolden(t)
	e, err := session.OpenEngine("go", "float32", 0)
	if err != nil {
		t.Fatal(err)
	}
	stats := func(init string) map[int][]float64 { // in → every A value of the adapter's linears of that fan-in
		m, err := dg.Load(e, demoBase, dg.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := lora.Attach(m, lora.Config{Rank: 16, Scale: 2, NumLayers: -1, Init: init}, 42)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int][]float64{}
		for name, p := range a.Params() {
			if filepath.Ext(name) == ".lora_b" {
				for _, v := range p.Float32s() {
					if v != 0 {
						t.Fatalf("%s: B is not zero", name)
					}
				}
				continue
			}
			in := p.Shape()[0]
			for _, v := range p.Float32s() {
				out[in] = append(out[in], float64(v))
			}
		}
		return out
	}
	moments := func(xs []float64) (mean, std float64) {
		for _, x := range xs {
			mean += x
		}
		mean /= float64(len(xs))
		for _, x := range xs {
			std += (x - mean) * (x - mean)
		}
		return mean, math.Sqrt(std / float64(len(xs)))
	}
	xavier, kaiming := stats(lora.InitXavierNormal), stats(lora.InitKaimingUniform)
	for _, ng := range g.Xavier {
		if ng.In > 128 {
			continue // the 26B shapes: NeMo's statistics only
		}
		xs := xavier[ng.In]
		if len(xs) == 0 {
			t.Fatalf("the demo base has no linear of fan-in %d", ng.In)
		}
		want := math.Sqrt(2 / float64(ng.In+16))
		if math.Abs(ng.ExpectedStd-want) > 1e-12 || ng.BMaxAbs != 0 || ng.Scale != 2 {
			t.Fatalf("NeMo's xavier for in %d: std %g (want %g), B max %g, scale %g", ng.In, ng.ExpectedStd, want, ng.BMaxAbs, ng.Scale)
		}
		mean, std := moments(xs)
		// Sampling errors: the mean's σ/√n, the standard deviation's about σ/√(2n); 5 of them.
		seOurs, seNeMo := want/math.Sqrt(float64(len(xs))), want/math.Sqrt(ng.N)
		if math.Abs(mean) > 5*seOurs || math.Abs(std-want) > 5*seOurs/math.Sqrt2 {
			t.Errorf("xavier_normal in %d: mean %.5f std %.5f over %d values, want 0 and %.5f", ng.In, mean, std, len(xs), want)
		}
		if d := math.Abs(std - ng.Std); d > 5*math.Hypot(seOurs, seNeMo)/math.Sqrt2 {
			t.Errorf("xavier_normal in %d: std %.5f, NeMo's %.5f over %g values", ng.In, std, ng.Std, ng.N)
		}
		_, kstd := moments(kaiming[ng.In])
		ratio, wantRatio := std/kstd, math.Sqrt(6*float64(ng.In)/float64(ng.In+16))
		if math.Abs(ratio-wantRatio) > 0.05*wantRatio {
			t.Errorf("in %d: xavier / kaiming std = %.3f, want √(6·in/(in+r)) = %.3f", ng.In, ratio, wantRatio)
		}
	}
	// gaussian: PEFT's N(0, 1/r²).
	_, gstd := moments(stats(lora.InitGaussian)[64])
	if math.Abs(gstd-1.0/16) > 0.003 {
		t.Errorf("gaussian: std %.5f, want 1/16", gstd)
	}
}

// stepShares is what the training loop does with one step's examples: global counts per
// micro-batch, shareDenominators, each example's ShareLoss; it returns the step's loss (the
// mean of the micro-batches, as stepArrays reports it) and each example's share.
func stepShares(terms []objective.Terms, micro []int, accum int, normalization string) (float64, []float64) {
	counts := make([]float64, 2*accum)
	for i, t := range terms {
		counts[2*micro[i]] += t.Count
		counts[2*micro[i]+1] += t.EncCount
	}
	dens := shareDenominators(counts, normalization)
	var sum float64
	shares := make([]float64, len(terms))
	for i, t := range terms {
		shares[i] = objective.ShareLoss([]objective.Terms{t}, dens[2*micro[i]], dens[2*micro[i]+1]).Item()
		sum += shares[i]
	}
	return sum / float64(accum), shares
}

// The step's loss with grad_accumulation_steps 2 over 2 ranks is NeMo's: each micro-batch's
// denoising CE over the step's scored canvas positions (num_diffusion_tokens) plus its
// encoder CE over the step's next-token pairs (num_ar_tokens), summed over micro-batches and
// ranks — on the same logits (a formula both sides evaluate) within 1e-6. Per-micro-batch
// averaging (mlx-lm's) gives another number.
func TestStepNormalizationMatchesNeMo(t *testing.T) {
	g := readNeMoGolden(t)
	red := g.Reduction
	e, err := session.OpenEngine("go", "float32", 0)
	if err != nil {
		t.Fatal(err)
	}
	const vocab = 512
	logits := func(f func(k, i, v int) float64, k, n int) *mx.Array {
		vals := make([]float32, n*vocab)
		for i := range n {
			for v := range vocab {
				vals[i*vocab+v] = float32(f(k, i, v))
			}
		}
		return mx.FromFloat32(e, vals, 1, n, vocab)
	}
	encLogit := func(k, i, v int) float64 { return float64((k*131+i*37+v*17)%101)/101.0*8.0 - 4.0 }
	decLogit := func(k, j, v int) float64 { return float64((k*71+j*43+v*29)%103)/103.0*6.0 - 3.0 }
	var terms []objective.Terms
	var micro []int
	wantMicro := map[int]float64{}
	for _, ex := range red.Examples {
		seq := ex.Clean[:ex.Length]
		target := seq[ex.Prefix:]
		lo, hi := ex.Block*nemoBlock, min((ex.Block+1)*nemoBlock, len(target))
		// The block's positions of the canvas, where NeMo's formula indexes the whole window.
		dec := mx.SliceAxis(logits(decLogit, ex.Row, hi), 1, lo, hi)
		enc := logits(encLogit, ex.Row, len(seq)-1)
		terms = append(terms, objective.Terms{
			Sum: mx.Sum(objective.CrossEntropy(dec, target[lo:hi]), false), Count: float64(hi - lo), Scale: 1,
			EncSum: mx.Sum(objective.CrossEntropy(enc, seq[1:]), false), EncCount: float64(len(seq) - 1), EncWeight: 1,
		})
		micro = append(micro, ex.MicroBatch)
		wantMicro[ex.MicroBatch] += ex.Loss
	}
	got, shares := stepShares(terms, micro, 2, config.NormalizeStep)
	if math.Abs(got-red.TotalLoss) > 1e-6 {
		t.Errorf("step loss %.8f, NeMo's %.8f", got, red.TotalLoss)
	}
	t.Logf("step loss %.8f, NeMo's %.8f", got, red.TotalLoss)
	gotMicro := map[int]float64{}
	for i, s := range shares {
		gotMicro[micro[i]] += s / 2 // a share is M × its micro-batch's part of the step
	}
	for m, w := range wantMicro {
		if math.Abs(gotMicro[m]-w) > 1e-6 {
			t.Errorf("micro-batch %d: %.8f, NeMo's (both ranks) %.8f", m, gotMicro[m], w)
		}
	}
	if mb, _ := stepShares(terms, micro, 2, config.NormalizeMicroBatch); math.Abs(mb-red.TotalLoss) < 1e-4 {
		t.Errorf("loss_normalization micro_batch gives NeMo's %.6f too: the test cannot tell them apart", mb)
	}
}

// The same step on the demo base: NeMo's corruption (its per-sample seeds), one-canvas
// choice and self-conditioning coins, transformers' DiffusionGemma for the logits, NeMo's
// losses. dgtune's objective on those corruptions gives each example's decoder and encoder
// CE sums, and the step's loss, within the engines' float32 differences.
func TestNeMoStepMatchesTransformers(t *testing.T) {
	g := readNeMoGolden(t)
	tr := g.Transformers
	cfg := nemoDataConfig(t)
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) { checkNeMoStep(t, cfg, tr, e) })
}

func checkNeMoStep(t *testing.T, cfg config.Config, tr nemoStep, e mx.Engine) {
	m, err := dg.Load(e, demoBase, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := session.ObjectiveFor(cfg, m.Config)
	if err != nil {
		t.Fatal(err)
	}
	if obj.BlockLen != nemoBlock || obj.Positions != objective.All || obj.EncoderWeight != 1 {
		t.Fatalf("objective %+v", obj)
	}
	var terms []objective.Terms
	var micro []int
	for _, ex := range tr.Examples {
		seq := ex.Clean[:ex.Length]
		target := seq[ex.Prefix:]
		lo, hi := ex.Block*nemoBlock, min((ex.Block+1)*nemoBlock, len(target))
		corrupt := make([]bool, hi-lo)
		for j := range corrupt {
			corrupt[j] = ex.NoiseMask[ex.Prefix+lo+j] == 1
		}
		c := objective.Corruption{Canvas: ex.CanvasIDs[lo:hi], Corrupt: corrupt, Block: ex.Block, SelfCond: ex.SelfConditioning}
		var term objective.Terms
		mx.Tidy(e, func() []*mx.Array {
			term = obj.ExampleTerms(m, objective.Example{Prompt: seq[:ex.Prefix], Target: target}, c)
			return []*mx.Array{term.Sum, term.EncSum}
		})
		if d, s := term.Sum.Item(), ex.DiffusionCESum; math.Abs(d-s) > 2e-5*s {
			t.Errorf("row %d: decoder CE sum %.6f, transformers + NeMo %.6f", ex.Row, d, s)
		}
		if d, s := term.EncSum.Item(), ex.EncoderCESum; math.Abs(d-s) > 2e-5*s {
			t.Errorf("row %d: encoder CE sum %.6f, transformers + NeMo %.6f", ex.Row, d, s)
		}
		t.Logf("row %d (block %d, self-conditioned %v): decoder CE sum %.6f vs %.6f, encoder %.6f vs %.6f", ex.Row, ex.Block,
			ex.SelfConditioning, term.Sum.Item(), ex.DiffusionCESum, term.EncSum.Item(), ex.EncoderCESum)
		terms = append(terms, term)
		micro = append(micro, ex.MicroBatch)
	}
	got, _ := stepShares(terms, micro, 2, cfg.LossNormalization)
	if math.Abs(got-tr.TotalLoss) > 2e-5*tr.TotalLoss {
		t.Errorf("step loss %.6f, NeMo's %.6f", got, tr.TotalLoss)
	}
	t.Logf("step loss %.7f, NeMo's %.7f", got, tr.TotalLoss)
}

// One recipe: nemo run on the tiny demo (the demo's data and canvas; 8 of the recipe's 800
// steps): the resolved config marks the recipe's and the objective preset's values, the run
// trains with batch 8 and NeMo's schedule (step 1 at lr 0, as NeMo's first update), writes
// lora_parameters.init into adapter_config.json, and an interrupted-then-resumed run ends
// with the same losses and bytes.
func TestRecipeNeMoOnDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the demo three times")
	}
	dir := t.TempDir()
	demo, err := filepath.Abs("../demo")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(writeRecipeYAML(t, fmt.Sprintf(`recipe: nemo
model: %s
data: %s
backend: go
max_canvas: 8
iters: 8
save_every: 4
steps_per_eval: 4
steps_per_report: 1
val_batches: 1
adapter_path: %s
eval:
  generate: false
`, filepath.Join(demo, "base"), filepath.Join(demo, "data", "shift"), filepath.Join(dir, "straight"))), nil)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	if _, err := Run(context.Background(), cfg, Options{Log: &log}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"batch_size: 8 # recipe nemo\n", "chat_template: nemo # recipe nemo\n", "    init: xavier_normal # recipe nemo\n",
		"    rank: 16 # recipe nemo\n", "    name: cosine_with_min_lr # recipe nemo\n", "self_conditioning: 0.5 # objective nemo\n",
		"max_canvas: 8\n", "recipe: nemo\n",
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the resolved config lacks %q:\n%s", want, log.String())
		}
	}
	evs := readMetrics(t, cfg.AdapterPath)
	var lrs []float64
	for _, ev := range evs {
		if ev.Event == "train" && ev.LR != nil {
			lrs = append(lrs, *ev.LR)
		}
	}
	if len(lrs) != 8 || lrs[0] != 0 || math.Abs(lrs[7]-7*1.5e-4/25) > 1e-18 {
		t.Errorf("learning rates %v, want 0, 6e-6, …, 4.2e-5 (NeMo's warm-up)", lrs)
	}
	ac, err := os.ReadFile(filepath.Join(cfg.AdapterPath, lora.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		LoRA     lora.LoRAParameters `json:"lora_parameters"`
		Training map[string]any      `json:"training"`
	}
	if err := json.Unmarshal(ac, &parsed); err != nil {
		t.Fatal(err)
	}
	if parsed.LoRA.Init != lora.InitXavierNormal || parsed.LoRA.Rank != 16 || parsed.LoRA.Scale != 2 || parsed.Training["recipe"] != "nemo" {
		t.Errorf("adapter_config.json: lora_parameters %+v, training.recipe %v", parsed.LoRA, parsed.Training["recipe"])
	}
	cfg.Overwrite = true // checkResumeExact trains the straight run again
	checkResumeExact(t, cfg, filepath.Join(dir, "resumed"), 2)
}

// self_conditioning_draw step: every example of a micro-batch takes the micro-batch's coin,
// which varies over steps; example draws per example, so micro-batches mix.
func TestSelfConditioningDrawStep(t *testing.T) {
	dir := t.TempDir()
	cfg := nemoConfig(t, dir)
	s, err := session.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]data.Pair, 6)
	for i := range batch {
		batch[i] = data.Pair{Index: i, Prompt: []int32{2, 105, 7}, Target: []int32{8, 9, 10, 11, 12, 13}}
	}
	all := func(int) bool { return true }
	for _, draw := range []string{config.DrawPerStep, config.DrawPerExample} {
		mixed, on, off := 0, 0, 0
		for step := 1; step <= 40; step++ {
			for m := range 2 {
				mb, _, _, _ := drawMicroBatch(s, cfg.Seed, draw, step, m, batch, all)
				n := 0
				for _, c := range mb.corr {
					if c.SelfCond {
						n++
					}
				}
				switch n {
				case 0:
					off++
				case len(batch):
					on++
				default:
					mixed++
				}
			}
		}
		switch {
		case draw == config.DrawPerStep && (mixed != 0 || on < 20 || off < 20):
			t.Errorf("draw step: %d micro-batches mixed, %d all on, %d all off; want none mixed and both kinds", mixed, on, off)
		case draw == config.DrawPerExample && mixed < 60:
			t.Errorf("draw example: only %d of 80 micro-batches mix their examples' coins", mixed)
		}
	}
}
