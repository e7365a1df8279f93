package estimate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/estimate"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/shapeeng"
)

func preset(t *testing.T, name string) *dg.Config {
	t.Helper()
	cfg, err := dg.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func policy(t *testing.T, cfg *dg.Config, p string) *dg.Quantization {
	t.Helper()
	q, err := dg.QuantizationPolicy(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// rank8 is the default adapter: rank 8 on the seven default keys of every layer.
func rank8() lora.Config { return lora.DefaultConfig() }

// mapped is a step of a model loaded from a checkpoint file on the go engine (the weights
// mapped in place), GOGC 100.
func mapped(q *dg.Quantization, promptLen, canvasLen int) estimate.Options {
	return estimate.Options{Quantization: q, LoRA: rank8(), PromptLen: promptLen, CanvasLen: canvasLen,
		GCPercent: 100, MappedWeights: true}
}

func step(t *testing.T, cfg *dg.Config, o estimate.Options) estimate.Estimate {
	t.Helper()
	est, err := estimate.Step(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return est
}

// TestWeightsTiny checks the weight, adapter and optimizer terms on the tiny preset
// (vocab 512, hidden 64, 2 layers: 0 sliding with 4×16 q and 2×16 k/v, 1 full with 4×32
// q and 1×32 k; intermediate 128; 4 experts of 32).
//
// Quantizable elements: embedding 512·64 = 32768; self-conditioning 3·128·64 = 24576;
// layer 0: q 64·64 + k 32·64 + v 32·64 + o 64·64 + mlp 3·128·64 + router 4·64 + experts
// 4·64·64 + 4·64·32 = 4096+2048+2048+4096+24576+256+16384+8192 = 61696; layer 1: q 128·64
// + k 32·64 + o 64·128 + mlp 24576 + router 256 + experts 24576 = 67840; total 186880.
// The expert down projection's input (32) is not a multiple of 64, so the group is 32.
// At 4 bits with scales and biases in the compute dtype, one element costs 4/8 byte plus
// 2·size/32: 0.75 B in float32, 0.625 B in bfloat16.
// Other tensors: final norm 64, pre_norm 64, 2 encoder scalars, and per layer q/k norms
// (2·16 | 2·32), router scale 64, per-expert scale 4, 7 norms of 64 and a scalar:
// 64+64+2 + 549 + 581 = 1260 elements, 4 (or 2) bytes each.
//
// LoRA on the seven default keys: Σ(in+out) = layer 0: 128+96+96+128+192+192+192 = 1024,
// layer 1 (no v): 192+96+192+192+192+192 = 1056 → 2080·8 = 16640 parameters, 4 bytes each
// for A/B, twice for AdamW's m and v; the gradients made by the peak are some of them.
func TestWeightsTiny(t *testing.T) {
	cfg := preset(t, dg.PresetTiny)
	q := policy(t, cfg, dg.Bits4)
	for _, tc := range []struct {
		dt          mx.DType
		wantWeights int64
	}{
		{mx.Float32, 186880*3/4 + 1260*4},  // 140160 + 5040 = 145200
		{mx.BFloat16, 186880*5/8 + 1260*2}, // 116800 + 2520 = 119320
	} {
		est := step(t, cfg, estimate.Options{Quantization: q, LoRA: rank8(), PromptLen: 16, CanvasLen: 16, DType: tc.dt})
		if est.Weights != tc.wantWeights || est.MappedWeights != 0 {
			t.Errorf("%s: Weights = %d (mapped %d), want %d (0)", tc.dt, est.Weights, est.MappedWeights, tc.wantWeights)
		}
		if est.TrainableParams != 16640 || est.LoRAParams != 66560 || est.OptimizerState != 133120 || est.AdaptedLinears != 13 {
			t.Errorf("%s: params %d on %d linears, LoRA %d, optimizer %d; want 16640 on 13, 66560, 133120",
				tc.dt, est.TrainableParams, est.AdaptedLinears, est.LoRAParams, est.OptimizerState)
		}
		if est.Gradients < 0 || est.Gradients > 66560 {
			t.Errorf("%s: gradients at the peak %d B, want between 0 and all of them (66560)", tc.dt, est.Gradients)
		}
		if sum := est.Weights + est.LoRAParams + est.OptimizerState + est.Gradients + est.Activations; sum != est.Peak.Total() || est.Total != sum {
			t.Errorf("%s: parts add up to %d, peak %d, total %d (GOGC 0)", tc.dt, sum, est.Peak.Total(), est.Total)
		}
	}
	// Unquantized: every element in float32.
	est := step(t, cfg, estimate.Options{LoRA: rank8(), PromptLen: 1, CanvasLen: 1})
	if want := int64(186880+1260) * 4; est.Weights != want {
		t.Errorf("unquantized: Weights = %d, want %d", est.Weights, want)
	}
}

// TestMappedWeightsTiny: loaded from a checkpoint the codes and the tensors stored in the
// compute dtype are the file's pages, and tensors stored in another dtype are mapped and
// copied. Stored in bfloat16 (as probe mkmodel writes quantized checkpoints): codes
// 186880/2 = 93440 B mapped; scales and biases 186880/16 = 11680 values → 23360 B mapped
// and 46720 B copied to float32; the other 1260 → 2520 + 5040. Weights 171080 B, 119320 of
// them mapped. GOGC 100 adds the peak's heap once more.
func TestMappedWeightsTiny(t *testing.T) {
	cfg := preset(t, dg.PresetTiny)
	o := mapped(policy(t, cfg, dg.Bits4), 16, 16)
	o.StoredDType = mx.BFloat16
	est := step(t, cfg, o)
	if est.Weights != 171080 || est.MappedWeights != 119320 {
		t.Errorf("weights %d (mapped %d), want 171080 (119320)", est.Weights, est.MappedWeights)
	}
	if est.Peak.Mapped != 119320 || est.GCHeadroom != est.Peak.Heap || est.Total != est.Peak.Total()+est.Peak.Heap {
		t.Errorf("peak heap %d + mapped %d, headroom %d, total %d: want the mapped weights outside the heap and the heap doubled",
			est.Peak.Heap, est.Peak.Mapped, est.GCHeadroom, est.Total)
	}
}

// TestRealGeometry: the 26B-A4B text model at 4 bits, rank 8, prompt 512, canvas 256. Its
// quantizable tensors hold 25,250,283,520 elements (embedding 262144·2816, 30 layers of
// attention, dense MLP, router and 128 experts of 1408·2816 + 2816·704, §2.2) and the rest
// 703,292 (bfloat16 in the config). As the go engine loads it: codes 25250283520/2 =
// 12,625,141,760 B mapped; scales and biases 789,071,360 values mapped in bfloat16
// (1,578,142,720 B) and copied to float32 (3,156,285,440 B); the rest 1,406,584 +
// 2,813,168 → 17,363,789,672 B (16.2 GiB), 14,204,691,064 B of it mapped. Held in bfloat16
// without mapping: 25250283520·(1/2 + 4/64) + 703292·2 = 14,204,691,064 B (13.2 GiB).
// §5.3: 9,292,800 trainable parameters.
func TestRealGeometry(t *testing.T) {
	cfg := preset(t, dg.PresetReal)
	q := policy(t, cfg, dg.Bits4)
	est := step(t, cfg, mapped(q, 512, 256))
	t.Logf("\n%s", est)
	if est.Weights != 17363789672 || est.MappedWeights != 14204691064 {
		t.Errorf("Weights = %d (mapped %d), want 17363789672 (14204691064)", est.Weights, est.MappedWeights)
	}
	if est.TrainableParams != 9292800 || est.AdaptedLinears != 205 {
		t.Errorf("trainable %d on %d linears, want 9292800 on 205", est.TrainableParams, est.AdaptedLinears)
	}
	bf := step(t, cfg, estimate.Options{Quantization: q, LoRA: rank8(), PromptLen: 512, CanvasLen: 256, DType: mx.BFloat16})
	if bf.Weights != 14204691064 {
		t.Errorf("bfloat16 Weights = %d, want 14204691064", bf.Weights)
	}
	// The logits are [256, 262144] float32 = 256 MiB a copy. The head's graph keeps four
	// (the product, /cap, tanh, ·cap) and the backward starts with three more (the
	// log-sum-exp's and the take's cotangents and their sum), so the peak is in the
	// backward with at least seven.
	if !est.InBackward || est.Activations < 7*256<<20 {
		t.Errorf("activations %d B (in the backward: %v), want the 7 logit copies %d B in the backward", est.Activations, est.InBackward, 7*256<<20)
	}
	// grad_checkpoint keeps the layers' boundaries and the head, not every layer's graph.
	co := mapped(q, 512, 256)
	co.GradCheckpoint = true
	ck := step(t, cfg, co)
	t.Logf("\n%s", ck)
	if ck.Activations*4 > est.Activations || ck.Total > 32<<30 {
		t.Errorf("grad_checkpoint: activations %d (plain %d), total %d; want under a quarter and 32 GiB", ck.Activations, est.Activations, ck.Total)
	}
	for _, want := range []string{"weights", "mapped from the checkpoint", "experts", "activations at the peak (in the backward pass)", "Go GC headroom (GOGC 100)", "total"} {
		if !strings.Contains(est.String(), want) {
			t.Errorf("String() lacks %q:\n%s", want, est)
		}
	}
}

// TestRealGeometryMatchesDevice compares the estimate with the go engine's peak resident
// memory measured on the device (`probe bench` at 16 threads on the real geometry drawn by
// `probe mkmodel --preset real --bits 4 --sharded`): 38,489,939,968 B at prompt 128 /
// canvas 256 (bench/results/device-s19.txt, lease d: the median of three runs of 3d162f5,
// whose one-pass NormRoPE keeps ~1.1 GB less than the composition did), and
// 24,531,857,408 B at 512 / 256 with grad_checkpoint (device-3963897.jsonl, before it).
// Both within 15 %.
func TestRealGeometryMatchesDevice(t *testing.T) {
	cfg := preset(t, dg.PresetReal)
	q := policy(t, cfg, dg.Bits4)
	for _, tc := range []struct {
		n, l     int
		ckpt     bool
		measured int64
	}{{128, 256, false, 38489939968}, {512, 256, true, 24531857408}} {
		o := mapped(q, tc.n, tc.l)
		o.StoredDType, o.GradCheckpoint, o.Threads = mx.BFloat16, tc.ckpt, 16
		est := step(t, cfg, o)
		r := float64(est.Total) / float64(tc.measured)
		t.Logf("prompt %d, canvas %d, grad_checkpoint %v: estimate %d B, measured %d B, ratio %.3f", tc.n, tc.l, tc.ckpt, est.Total, tc.measured, r)
		if r < 0.85 || r > 1.15 {
			t.Errorf("prompt %d, canvas %d, grad_checkpoint %v: estimate %d B is %.2f× the measured %d B, want within 15 %%", tc.n, tc.l, tc.ckpt, est.Total, r, tc.measured)
		}
	}
}

// TestLongPrompt: a prompt of 25,000 tokens on the tiny preset. Its encoder's attention is
// what costs: layer 0 (sliding, 4 query heads over 2 kv heads) scores every query against
// all 25,000 keys before masking, and its backward cannot keep the probabilities
// (4·25000² floats ≫ goeng's 2^21), so it recomputes them one kv head's block at a time —
// 2 query heads × 25000 rows × 25000 keys = 1.25e9 floats — with dP beside them: 2.5e9
// floats, 1e10 B of scratch. Layer 1 is the last: its encoder rows form only keys and
// values. The mask, one bool per query and key (6.25e8 B), is kept for the backward; the
// estimate never computes its values. (Measured on the demo base, the same geometry with
// a 64-token window: one step at prompt 25,000 + canvas 8 peaks at 16,383,918,080 B RSS
// on the go engine, `probe bench`; this estimate says 20.5 GiB with GOGC 100's headroom
// over the scratch too.)
func TestLongPrompt(t *testing.T) {
	cfg := preset(t, dg.PresetTiny)
	est := step(t, cfg, mapped(nil, 25000, 8))
	if got := est.Peak.Label("attention scores"); got != 1e10 || !est.InBackward {
		t.Errorf("attention scores at the peak %d B (in the backward: %v), want 1e10 in the backward\n%s", got, est.InBackward, est)
	}
	if got := est.Peak.Label("full"); got < 625_000_000 {
		t.Errorf("constants at the peak %d B, want at least the 6.25e8 B mask", got)
	}
	// A short prompt keeps its probabilities: the largest is one call's dP.
	short := step(t, cfg, mapped(nil, 16, 8))
	if got := short.Peak.Label("attention scores"); got > 4*4*24*24 {
		t.Errorf("short prompt: attention scratch %d B at the peak, want at most one call's dP", got)
	}
}

// TestRetention: an engine that frees each array after its last reader (RetainNeeded)
// holds less at the peak than the go engine's graph, and never more.
func TestRetention(t *testing.T) {
	cfg := preset(t, dg.PresetSmall)
	graph := step(t, cfg, mapped(policy(t, cfg, dg.Bits4), 64, 64))
	o := mapped(policy(t, cfg, dg.Bits4), 64, 64)
	o.Retention = shapeeng.RetainNeeded
	needed := step(t, cfg, o)
	t.Logf("activations at the peak: graph %d B, needed %d B", graph.Activations, needed.Activations)
	if needed.Activations >= graph.Activations || needed.Weights != graph.Weights {
		t.Errorf("needed-only activations %d B (weights %d), graph %d B (weights %d): want fewer activations, the same weights",
			needed.Activations, needed.Weights, graph.Activations, graph.Weights)
	}
}

// TestBadInput: each bad argument is an error naming it, never a panic.
func TestBadInput(t *testing.T) {
	cfg := preset(t, dg.PresetTiny)
	ok := estimate.Options{LoRA: rank8(), PromptLen: 4, CanvasLen: 4}
	bad := *cfg
	bad.TextConfig.HiddenSize = 0
	tests := []struct {
		name string
		cfg  *dg.Config
		edit func(o *estimate.Options)
		is   error
		want string
	}{
		{"nil config", nil, func(*estimate.Options) {}, estimate.ErrConfig, "no config"},
		{"negative prompt", cfg, func(o *estimate.Options) { o.PromptLen = -1 }, estimate.ErrLengths, "prompt -1"},
		{"empty canvas", cfg, func(o *estimate.Options) { o.CanvasLen = 0 }, estimate.ErrLengths, "canvas 0"},
		{"rank 0", cfg, func(o *estimate.Options) { o.LoRA.Rank = 0 }, estimate.ErrRank, "0 (want ≥ 1)"},
		{"unknown key", cfg, func(o *estimate.Options) { o.LoRA.Keys = []string{"self_attn.x_proj"} }, nil, `"self_attn.x_proj"`},
		{"num_layers", cfg, func(o *estimate.Options) { o.LoRA.NumLayers = 3 }, nil, "num_layers 3"},
		{"dropout", cfg, func(o *estimate.Options) { o.LoRA.Dropout = 1 }, nil, "dropout 1"},
		{"GC percent", cfg, func(o *estimate.Options) { o.GCPercent = -5 }, nil, "GC percent -5"},
		{"retention", cfg, func(o *estimate.Options) { o.Retention = 7 }, nil, "retention 7"},
		{"engine", cfg, func(o *estimate.Options) { o.Engine = "tpu" }, nil, `engine "tpu"`},
		{"dtype", cfg, func(o *estimate.Options) { o.DType = mx.Int32 }, nil, "not a float type"},
		{"bits", cfg, func(o *estimate.Options) { o.Quantization = &dg.Quantization{Bits: 7, GroupSize: 64} }, nil, "bits 7"},
		{"group", cfg, func(o *estimate.Options) { o.Quantization = &dg.Quantization{Bits: 4, GroupSize: 48} }, nil, "group_size 48"},
		{"invalid config", &bad, func(*estimate.Options) {}, nil, "hidden_size"},
	}
	for _, tc := range tests {
		o := ok
		tc.edit(&o)
		_, err := estimate.Step(tc.cfg, o)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: error %v is not %v", tc.name, err, tc.is)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q lacks %q", tc.name, err, tc.want)
		}
	}
}

// TestMLXEngine: the mlx engine's estimate is the recording with every weight in the
// engine's memory in the compute dtype and no GC headroom, whatever MappedWeights and
// GCPercent say.
func TestMLXEngine(t *testing.T) {
	cfg := preset(t, dg.PresetSmall)
	for _, dt := range []mx.DType{mx.Float32, mx.BFloat16} {
		o := mapped(policy(t, cfg, dg.Bits4), 64, 64)
		o.DType, o.Engine = dt, estimate.EngineMLX
		got := step(t, cfg, o)
		o.Engine, o.MappedWeights, o.GCPercent = estimate.EngineGo, false, 0
		want := step(t, cfg, o)
		if got.Total != want.Total || got.Weights != want.Weights || got.MappedWeights != 0 || got.GCHeadroom != 0 {
			t.Errorf("%s: mlx total %d (weights %d, mapped %d, GC %d), want the unmapped go recording without GC: %d (weights %d)",
				dt, got.Total, got.Weights, got.MappedWeights, got.GCHeadroom, want.Total, want.Weights)
		}
		if !strings.Contains(got.String(), "mlx engine") {
			t.Errorf("%s: String() does not name the engine:\n%s", dt, got)
		}
	}
}
