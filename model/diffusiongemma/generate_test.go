package diffusiongemma

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// genPrompt is a chat-shaped prompt inside the tiny vocabulary (512).
var genPrompt = []int32{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12}

// genModel is synthModel on the go engine with seed 1.
func genModel(tb testing.TB, preset, bits string) *Model {
	tb.Helper()
	m, _ := synthModel(tb, mxtest.Go(tb), preset, bits, 1)
	return m
}

// genTinyOptions are the tiny model's defaults with a small step budget, so tests stay fast,
// and no EOS unless a test sets one (a random model may produce 1/50/106 anywhere).
func genTinyOptions(m *Model) GenerateOptions {
	o := DefaultGenerateOptions(m.Config)
	o.Steps = 8
	o.MaxTokens = 16
	o.StopRule = nil
	o.EOS = nil
	return o
}

func recordSteps(o *GenerateOptions) *[]StepInfo {
	var steps []StepInfo
	o.OnStep = func(s StepInfo) { steps = append(steps, s) }
	return &steps
}

func TestDefaultGenerateOptions(t *testing.T) {
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultGenerateOptions(cfg)
	// §1.5 / §4.1 values; the preset carries the google generation config (stop rule on).
	if o.MaxTokens != 256 || o.Steps != 48 || o.Sampler != SamplerConfidence || o.Threshold != 0.9 ||
		o.EntropyBound != 0.1 || o.Temperature != 0 || o.TMin != 0.4 || o.TMax != 0.8 ||
		o.MinCanvas != 64 || o.MaxCanvas != 16 || o.FullCanvas {
		t.Errorf("DefaultGenerateOptions(tiny) = %+v", o)
	}
	if o.StopRule == nil || *o.StopRule != (StopRule{ConfidenceThreshold: 0.005, StabilityThreshold: 1}) {
		t.Errorf("StopRule = %v, want {0.005 1}", o.StopRule)
	}
	if !slices.Equal(o.EOS, []int{1, 50, 106}) {
		t.Errorf("EOS = %v, want [1 50 106]", o.EOS)
	}
	// A generation config without the stop-rule keys (optiq's checkpoint) leaves it off.
	g := DefaultGenerationConfig()
	cfg.GenerationConfig = &g
	if o := DefaultGenerateOptions(cfg); o.StopRule != nil {
		t.Errorf("StopRule = %v with no stop keys, want nil", *o.StopRule)
	}
	// No config at all: §1.5 defaults, model canvas left to Generate.
	if o := DefaultGenerateOptions(nil); o.Steps != 48 || o.MaxTokens != 256 || o.MaxCanvas != 0 || o.EOS != nil {
		t.Errorf("DefaultGenerateOptions(nil) = %+v", o)
	}
}

func TestGenerateRejectsBadInput(t *testing.T) {
	m := genModel(t, "tiny", "0")
	tests := []struct {
		name   string
		mod    func(o *GenerateOptions)
		prompt []int32
		want   string
	}{
		{"max tokens", func(o *GenerateOptions) { o.MaxTokens = 0 }, nil, "max tokens must be positive, got 0"},
		{"steps", func(o *GenerateOptions) { o.Steps = -1 }, nil, "denoising steps must be positive, got -1"},
		{"sampler", func(o *GenerateOptions) { o.Sampler = "topk" }, nil, `sampler "topk" is unknown`},
		{"threshold", func(o *GenerateOptions) { o.Threshold = 1.5 }, nil, "confidence threshold must be in [0, 1], got 1.5"},
		{"threshold NaN", func(o *GenerateOptions) { o.Threshold = math.NaN() }, nil, "confidence threshold must be in [0, 1], got NaN"},
		{"entropy bound", func(o *GenerateOptions) { o.EntropyBound = -0.1 }, nil, "entropy bound must be finite and >= 0, got -0.1"},
		{"temperature", func(o *GenerateOptions) { o.Temperature = -1 }, nil, "temperature must be finite and >= 0"},
		{"t_min", func(o *GenerateOptions) { o.TMin = 0 }, nil, "schedule temperatures must be finite and positive, got t_min 0, t_max 0.8"},
		{"t_max", func(o *GenerateOptions) { o.TMax = math.Inf(1) }, nil, "t_max +Inf"},
		{"min canvas", func(o *GenerateOptions) { o.MinCanvas = 0 }, nil, "min canvas must be positive, got 0"},
		{"max canvas", func(o *GenerateOptions) { o.MaxCanvas = -3 }, nil, "max canvas must be >= 0 (0 = the model's 16), got -3"},
		{"stop stability", func(o *GenerateOptions) { o.StopRule = &StopRule{StabilityThreshold: -1} }, nil, "stability threshold must be >= 0, got -1"},
		{"stop confidence", func(o *GenerateOptions) { o.StopRule = &StopRule{ConfidenceThreshold: math.NaN()} }, nil, "stop rule confidence threshold must be >= 0, got NaN"},
		{"eos", func(o *GenerateOptions) { o.EOS = []int{1, 512} }, nil, "eos id 512 is outside the vocabulary [0, 512)"},
		{"empty prompt", nil, []int32{}, "prompt is empty"},
		{"prompt id", nil, []int32{2, 600}, "prompt token 1 is 600, outside the vocabulary [0, 512)"},
		{"negative prompt id", nil, []int32{-1}, "prompt token 0 is -1"},
	}
	for _, tc := range tests {
		o := genTinyOptions(m)
		if tc.mod != nil {
			tc.mod(&o)
		}
		prompt := genPrompt
		if tc.prompt != nil {
			prompt = tc.prompt
		}
		res, err := m.Generate(prompt, o)
		if err == nil {
			t.Errorf("%s: Generate succeeded (%v), want error containing %q", tc.name, res.Tokens, tc.want)
			continue
		}
		if !errors.Is(err, ErrBadGenerateOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want ErrBadGenerateOptions containing %q", tc.name, err, tc.want)
		}
	}
	// Every problem is reported at once.
	o := genTinyOptions(m)
	o.Steps, o.MinCanvas = 0, 0
	if _, err := m.Generate(genPrompt, o); err == nil || !strings.Contains(err.Error(), "steps") || !strings.Contains(err.Error(), "min canvas") {
		t.Errorf("two bad options: error %v, want both listed", err)
	}
}

// The confidence sampler reveals at least one position per pass and never changes a revealed
// token; each pass's input is the previous pass's output canvas; greedy reveals take the
// argmax.
func TestGenerateConfidenceSampler(t *testing.T) {
	m := genModel(t, "tiny", "0")
	o := genTinyOptions(m)
	o.Steps = 48 // enough that the block normally ends by revealing everything
	steps := recordSteps(&o)
	res, err := m.Generate(genPrompt, o)
	if err != nil {
		t.Fatal(err)
	}
	l := 16
	if res.Blocks != 1 || res.CanvasTokens != l || len(*steps) != res.Steps || res.BlockSteps[0] != res.Steps {
		t.Fatalf("result %+v with %d recorded passes", res, len(*steps))
	}
	// ≥1 reveal per pass ⇒ all 16 revealed by pass 16 at the latest, which ends the block.
	if res.Steps > l {
		t.Errorf("block took %d passes, want ≤ %d", res.Steps, l)
	}
	revealedTok := map[int]int32{}
	prevCount := 0
	for i, s := range *steps {
		if s.Pass != i+1 || s.Step != o.Steps-i || s.Block != 0 {
			t.Errorf("pass %d: Pass %d Step %d Block %d", i, s.Pass, s.Step, s.Block)
		}
		if i > 0 && !slices.Equal(s.Input, (*steps)[i-1].Canvas) {
			t.Errorf("pass %d: input is not the previous pass's canvas", s.Pass)
		}
		if s.Revealed == nil {
			t.Fatalf("pass %d ran no sampler", s.Pass)
		}
		count := 0
		for j, r := range s.Revealed {
			if !r {
				if old, ok := revealedTok[j]; ok {
					t.Errorf("pass %d: position %d (revealed as %d) was un-revealed", s.Pass, j, old)
				}
				continue
			}
			count++
			if old, ok := revealedTok[j]; ok {
				if s.Canvas[j] != old {
					t.Errorf("pass %d: revealed position %d changed %d → %d", s.Pass, j, old, s.Canvas[j])
				}
			} else {
				if s.Canvas[j] != s.Argmax[j] {
					t.Errorf("pass %d: position %d revealed as %d, greedy argmax is %d", s.Pass, j, s.Canvas[j], s.Argmax[j])
				}
				revealedTok[j] = s.Canvas[j]
			}
		}
		if count <= prevCount {
			t.Errorf("pass %d revealed nothing new (%d → %d)", s.Pass, prevCount, count)
		}
		prevCount = count
		if s.Final != (i == len(*steps)-1) {
			t.Errorf("pass %d: Final %v", s.Pass, s.Final)
		}
	}
	last := (*steps)[len(*steps)-1]
	if prevCount != l || !last.Final {
		t.Errorf("block ended with %d/%d revealed (final %v)", prevCount, l, last.Final)
	}
	// The block's tokens are the last pass's argmax, not the draft canvas.
	if !slices.Equal(res.Tokens, last.Argmax) || res.FinishReason != FinishLength {
		t.Errorf("tokens %v (%s), want last argmax %v (length)", res.Tokens, res.FinishReason, last.Argmax)
	}
}

// The entropy sampler recomputes acceptance every pass (never an early stop without the stop
// rule), accepts the lowest-entropy position at least, and feeds accepted positions back as
// their (greedy) denoised token.
func TestGenerateEntropySampler(t *testing.T) {
	m := genModel(t, "tiny", "0")
	o := genTinyOptions(m)
	o.Sampler = SamplerEntropy
	o.Steps = 5
	steps := recordSteps(&o)
	res, err := m.Generate(genPrompt, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 5 || len(*steps) != 5 {
		t.Fatalf("Steps %d (%d recorded), want all 5 passes", res.Steps, len(*steps))
	}
	for _, s := range (*steps)[:4] {
		n := 0
		for j, r := range s.Revealed {
			if r {
				n++
				if s.Canvas[j] != s.Argmax[j] {
					t.Errorf("pass %d: accepted position %d fed back as %d, argmax %d", s.Pass, j, s.Canvas[j], s.Argmax[j])
				}
			}
		}
		if n == 0 {
			t.Errorf("pass %d accepted nothing", s.Pass)
		}
	}
	last := (*steps)[4]
	if last.Step != 1 || !last.Final || last.Canvas != nil || last.Revealed != nil {
		t.Errorf("last pass %+v: want step 1, final, no sampler output", last)
	}
	if !slices.Equal(res.Tokens, last.Argmax) {
		t.Errorf("tokens %v, want last argmax %v", res.Tokens, last.Argmax)
	}
}

// A hand-run of the first two passes reproduces the engine: temperature schedule, division,
// argmax, the confidence rule, and self-conditioning of pass 2 on pass 1's processed logits.
func TestGenerateMatchesHandRun(t *testing.T) {
	m := genModel(t, "tiny", "0")
	e := m.Engine
	o := genTinyOptions(m)
	steps := recordSteps(&o)
	if _, err := m.Generate(genPrompt, o); err != nil {
		t.Fatal(err)
	}
	s1, s2 := (*steps)[0], (*steps)[1]
	c := m.NewCache()
	m.Encode(mx.FromInt32(e, genPrompt, 1, len(genPrompt)), c)
	if s1.Offset != len(genPrompt) || c.Offset != s1.Offset {
		t.Errorf("block 0 offset %d, cache offset %d, want %d", s1.Offset, c.Offset, len(genPrompt))
	}
	// Pass 1 at step S = 8: T = 0.4 + 0.4·8/8 = 0.8, no self-conditioning.
	if s1.Temperature != 0.8 || s2.Temperature != 0.4+0.4*(7.0/8.0) {
		t.Errorf("temperatures %v, %v; want 0.8, 0.75", s1.Temperature, s2.Temperature)
	}
	p1 := mx.DivScalar(m.Decode(mx.FromInt32(e, s1.Input, 1, 16), c, nil), 0.8)
	if got := mx.Argmax(p1, -1, false).Int32s(); !slices.Equal(got, s1.Argmax) {
		t.Errorf("pass 1 argmax %v, engine %v", got, s1.Argmax)
	}
	// Confidence rule by hand in float64: accept p ≥ 0.9, else the single most probable.
	v := p1.Float32s()
	vocab := 512
	conf := make([]float64, 16)
	wantRev := make([]bool, 16)
	forced := true
	for j := range 16 {
		row := v[j*vocab : (j+1)*vocab]
		mx64 := math.Inf(-1)
		for _, x := range row {
			mx64 = math.Max(mx64, float64(x))
		}
		var z float64
		for _, x := range row {
			z += math.Exp(float64(x) - mx64)
		}
		conf[j] = math.Exp(float64(row[s1.Argmax[j]])-mx64) / z
		wantRev[j] = conf[j] >= 0.9
		forced = forced && !wantRev[j]
	}
	if forced {
		best := 0
		for j := range conf {
			if conf[j] > conf[best] {
				best = j
			}
		}
		wantRev[best] = true
	}
	if !slices.Equal(s1.Revealed, wantRev) {
		t.Errorf("pass 1 revealed %v, want %v (conf %v)", s1.Revealed, wantRev, conf)
	}
	// Pass 2 is conditioned on softmax(P1)·E·√H.
	in2 := mx.FromInt32(e, s2.Input, 1, 16)
	p2 := mx.DivScalar(m.Decode(in2, c, m.SoftEmbedding(p1)), s2.Temperature)
	if got := mx.Argmax(p2, -1, false).Int32s(); !slices.Equal(got, s2.Argmax) {
		t.Errorf("pass 2 argmax %v, engine %v", got, s2.Argmax)
	}
	// … and self-conditioning matters: without it the logits differ.
	plain := mx.DivScalar(m.Decode(in2, c, nil), s2.Temperature)
	if d := mx.Max(mx.Abs(mx.Subtract(plain, p2)), false).Item(); d == 0 {
		t.Error("pass 2 logits identical with and without self-conditioning")
	}
}

// A two-block run: the second block's decoder reads an encoder pass over the first block's
// full final canvas, at continuing positions.
func TestGenerateSecondBlockSeesFirst(t *testing.T) {
	m := genModel(t, "tiny", "0")
	e := m.Engine
	o := genTinyOptions(m)
	o.MaxTokens = 20 // blocks of 16 and min(16, max(4, 64→16)) = 16, emitting 16 + 4
	steps := recordSteps(&o)
	res, err := m.Generate(genPrompt, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocks != 2 || len(res.Tokens) != 20 || res.FinishReason != FinishLength || res.CanvasTokens != 32 {
		t.Fatalf("result %+v, want 2 blocks, 20 tokens, length, 32 canvas tokens", res)
	}
	if len(res.BlockSteps) != 2 || res.BlockSteps[0]+res.BlockSteps[1] != res.Steps ||
		res.WorkTokens != 16*res.Steps {
		t.Errorf("BlockSteps %v, Steps %d, WorkTokens %d", res.BlockSteps, res.Steps, res.WorkTokens)
	}
	var first0, last0, first1, last1 StepInfo
	for _, s := range *steps {
		if s.Pass == 1 && s.Block == 0 {
			first0 = s
		}
		if s.Pass == 1 && s.Block == 1 {
			first1 = s
		}
		if s.Final && s.Block == 0 {
			last0 = s
		}
		if s.Final && s.Block == 1 {
			last1 = s
		}
	}
	n := len(genPrompt)
	if first0.Offset != n || first1.Offset != n+16 {
		t.Errorf("offsets %d, %d; want %d, %d", first0.Offset, first1.Offset, n, n+16)
	}
	if !slices.Equal(res.Tokens[:16], last0.Argmax) || !slices.Equal(res.Tokens[16:], last1.Argmax[:4]) {
		t.Errorf("tokens %v, want block 0's final argmax %v then block 1's first 4 of %v", res.Tokens, last0.Argmax, last1.Argmax)
	}
	// Re-encode prompt + block 0's final canvas by hand: block 1's first pass matches.
	encode := func(block0 []int32) *Cache {
		c := m.NewCache()
		m.Encode(mx.FromInt32(e, genPrompt, 1, n), c)
		m.Encode(mx.FromInt32(e, block0, 1, 16), c)
		return c
	}
	in := mx.FromInt32(e, first1.Input, 1, 16)
	c := encode(last0.Argmax)
	if c.Offset != first1.Offset {
		t.Errorf("hand cache offset %d, engine %d", c.Offset, first1.Offset)
	}
	p := mx.DivScalar(m.Decode(in, c, nil), first1.Temperature)
	if got := mx.Argmax(p, -1, false).Int32s(); !slices.Equal(got, first1.Argmax) {
		t.Errorf("block 1 pass 1 argmax %v, engine %v", got, first1.Argmax)
	}
	// A different first block changes what the second block's decoder sees.
	other := slices.Clone(last0.Argmax)
	for j := range other {
		other[j] = (other[j] + 1) % 512
	}
	q := mx.DivScalar(m.Decode(in, encode(other), nil), first1.Temperature)
	if d := mx.Max(mx.Abs(mx.Subtract(p, q)), false).Item(); d == 0 {
		t.Error("block 1 logits do not depend on block 0's canvas")
	}
}

// Emission stops at the first EOS, which is not emitted. EOS only affects emission, so a run
// with an EOS set must give exactly the no-EOS run's tokens cut before the first occurrence.
func TestGenerateStopsAtFirstEOS(t *testing.T) {
	m := genModel(t, "tiny", "0")
	o := genTinyOptions(m)
	base, err := m.Generate(genPrompt, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(base.Tokens) != 16 || base.FinishReason != FinishLength {
		t.Fatalf("no-EOS run: %d tokens (%s), want 16 (length)", len(base.Tokens), base.FinishReason)
	}
	stopID := base.Tokens[5]
	cut := slices.Index(base.Tokens, stopID) // ≤ 5: the first occurrence
	o.EOS = []int{int(stopID)}
	res, err := m.Generate(genPrompt, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, base.Tokens[:cut]) || res.FinishReason != FinishStop {
		t.Errorf("with EOS %d: %v (%s), want %v (stop)", stopID, res.Tokens, res.FinishReason, base.Tokens[:cut])
	}
	if res.Steps != base.Steps {
		t.Errorf("EOS changed the denoising: %d passes vs %d", res.Steps, base.Steps)
	}
}

func TestGenerateLength(t *testing.T) {
	m := genModel(t, "tiny", "0")
	o := genTinyOptions(m)
	// L = min(8, max(5, 4)) = 5: one block of exactly the wanted length.
	o.MaxTokens, o.MinCanvas, o.MaxCanvas = 5, 4, 8
	res, err := m.Generate(genPrompt, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) != 5 || res.FinishReason != FinishLength || res.Blocks != 1 || res.CanvasTokens != 5 {
		t.Errorf("result %+v, want 5 tokens, length, 1 block of 5", res)
	}
	// FullCanvas forces the model's 16 even for 3 wanted tokens; only 3 are emitted.
	o.MaxTokens, o.FullCanvas = 3, true
	res, err = m.Generate(genPrompt, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) != 3 || res.CanvasTokens != 16 || res.FinishReason != FinishLength {
		t.Errorf("full canvas: result %+v, want 3 tokens from a 16-token canvas", res)
	}
}

func TestGenerateStopRule(t *testing.T) {
	m := genModel(t, "tiny", "0")
	tests := []struct {
		rule *StopRule
		want int
	}{
		// Off: the entropy sampler never stops early, all 6 passes.
		{nil, 6},
		// Stability 0 is always "stable"; a huge entropy bound is always "confident": the
		// first pass ends the block.
		{&StopRule{StabilityThreshold: 0, ConfidenceThreshold: 1e9}, 1},
		// Mean entropy is never < 0: never confident.
		{&StopRule{StabilityThreshold: 0, ConfidenceThreshold: 0}, 6},
	}
	for _, tc := range tests {
		o := genTinyOptions(m)
		o.Sampler = SamplerEntropy
		o.Steps = 6
		o.StopRule = tc.rule
		steps := recordSteps(&o)
		res, err := m.Generate(genPrompt, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Steps != tc.want {
			t.Errorf("stop rule %v: %d passes, want %d", tc.rule, res.Steps, tc.want)
		}
		last := (*steps)[len(*steps)-1]
		if !last.Final || !slices.Equal(res.Tokens, last.Argmax) {
			t.Errorf("stop rule %v: tokens %v, want final argmax %v", tc.rule, res.Tokens, last.Argmax)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	m := genModel(t, "tiny", "0")
	run := func(seed uint64, temp float64) (*GenerateResult, []int32) {
		o := genTinyOptions(m)
		o.Seed, o.Temperature = seed, temp
		steps := recordSteps(&o)
		res, err := m.Generate(genPrompt, o)
		if err != nil {
			t.Fatal(err)
		}
		return res, (*steps)[0].Input
	}
	for _, temp := range []float64{0, 0.7} {
		a, inA := run(3, temp)
		b, inB := run(3, temp)
		if !slices.Equal(a.Tokens, b.Tokens) || a.Steps != b.Steps || !slices.Equal(inA, inB) {
			t.Errorf("temperature %g: same seed gave %v (%d passes) and %v (%d passes)", temp, a.Tokens, a.Steps, b.Tokens, b.Steps)
		}
		for _, tok := range a.Tokens {
			if tok < 0 || tok >= 512 {
				t.Errorf("temperature %g: token %d outside the vocabulary", temp, tok)
			}
		}
		if _, inC := run(4, temp); slices.Equal(inA, inC) {
			t.Errorf("temperature %g: seeds 3 and 4 drew the same initial canvas", temp)
		}
	}
}

// With temperature > 0 the denoiser canvas is sampled from softmax(P/temperature) rather than
// taken as the argmax. An unbounded entropy budget accepts every position, so each pass's
// output canvas is the sampled canvas itself; at temperature 1.5 over 16 positions and 7
// passes some draw differs from the argmax (the run is deterministic for the fixed seed).
func TestGenerateTemperatureSamples(t *testing.T) {
	m := genModel(t, "tiny", "0")
	o := genTinyOptions(m)
	o.Temperature = 1.5
	o.Sampler = SamplerEntropy
	o.EntropyBound = 1e9 // accept every position, so Canvas is the sampled canvas itself
	steps := recordSteps(&o)
	if _, err := m.Generate(genPrompt, o); err != nil {
		t.Fatal(err)
	}
	differs := 0
	for _, s := range (*steps)[:len(*steps)-1] {
		for j, r := range s.Revealed {
			if !r {
				t.Fatalf("pass %d: position %d rejected under an unbounded entropy budget", s.Pass, j)
			}
			if s.Canvas[j] != s.Argmax[j] {
				differs++
			}
		}
	}
	if differs == 0 {
		t.Error("temperature 1.5 never sampled a non-argmax token")
	}
}

func BenchmarkGenerate(b *testing.B) {
	m := genModel(b, "small", "4")
	o := DefaultGenerateOptions(m.Config)
	o.MaxTokens = 64
	o.EOS = nil // fixed work: no early EOS from the random weights
	prompt := make([]int32, 16)
	for i := range prompt {
		prompt[i] = int32(10 + i)
	}
	var passes int
	b.ResetTimer()
	for range b.N {
		res, err := m.Generate(prompt, o)
		if err != nil {
			b.Fatal(err)
		}
		passes = res.Steps
	}
	b.ReportMetric(float64(passes), "passes/op")
}

func BenchmarkDecoderPass(b *testing.B) {
	m := genModel(b, "small", "4")
	e := m.Engine
	prompt := make([]int32, 16)
	canvas := make([]int32, 64)
	for i := range prompt {
		prompt[i] = int32(10 + i)
	}
	for i := range canvas {
		canvas[i] = int32(100 + 7*i)
	}
	c := m.NewCache()
	m.Encode(mx.FromInt32(e, prompt, 1, len(prompt)), c)
	in := mx.FromInt32(e, canvas, 1, len(canvas))
	b.ResetTimer()
	for range b.N {
		mx.Tidy(e, func() []*mx.Array {
			mx.Eval(m.Decode(in, c, nil))
			return nil
		})
	}
}

// OnBlock sees each block's emitted tokens once, in order, as soon as the block is final:
// their concatenation is the result, each block's passes are its BlockSteps, and only the
// last report says so. With MaxTokens 20 and canvas 8 the blocks are 8, 8 and 4 tokens
// (CanvasLength clamps the last to the 4 still wanted, MinCanvas being 4).
func TestGenerateOnBlock(t *testing.T) {
	m := genModel(t, "tiny", "0")
	o := genTinyOptions(m)
	o.MaxTokens, o.MinCanvas, o.MaxCanvas = 20, 4, 8
	var blocks []BlockInfo
	o.OnBlock = func(b BlockInfo) { blocks = append(blocks, b) }
	res, err := m.Generate(genPrompt, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || res.Blocks != 3 {
		t.Fatalf("%d OnBlock calls, result %d blocks, want 3 and 3", len(blocks), res.Blocks)
	}
	var joined []int32
	for i, b := range blocks {
		if b.Block != i || b.Steps != res.BlockSteps[i] || b.Last != (i == 2) {
			t.Errorf("block %d: %+v, want index %d, %d steps, last %v", i, b, i, res.BlockSteps[i], i == 2)
		}
		if want := []int{8, 8, 4}[i]; len(b.Tokens) != want {
			t.Errorf("block %d: %d tokens, want %d", i, len(b.Tokens), want)
		}
		joined = append(joined, b.Tokens...)
	}
	if !slices.Equal(joined, res.Tokens) {
		t.Errorf("blocks joined %v, result %v", joined, res.Tokens)
	}
	// An EOS inside the first block ends generation there: one report, marked last, without
	// the EOS.
	o.EOS = []int{int(res.Tokens[3])}
	cut := slices.Index(res.Tokens, res.Tokens[3])
	blocks = nil
	if _, err := m.Generate(genPrompt, o); err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || !blocks[0].Last || !slices.Equal(blocks[0].Tokens, res.Tokens[:cut]) {
		t.Errorf("with EOS %d: blocks %+v, want one last block %v", res.Tokens[3], blocks, res.Tokens[:cut])
	}
}

// Interrupt is polled before every block and decoder pass: an error on the n-th poll stops
// generation there, returns the finished blocks' tokens with an error wrapping both
// ErrInterrupted and the cause, and runs no further pass.
func TestGenerateInterrupt(t *testing.T) {
	m := genModel(t, "tiny", "0")
	o := genTinyOptions(m)
	o.MaxTokens, o.MinCanvas, o.MaxCanvas = 16, 8, 8
	o.Sampler, o.Steps = SamplerEntropy, 3 // no early stop: exactly 3 passes per block
	full, err := m.Generate(genPrompt, o)
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("stop now")
	tests := []struct {
		stopAt     int // the poll that fails (1-based)
		wantTokens int
		wantPasses int
	}{
		{1, 0, 0},   // before the prompt is encoded
		{3, 0, 0},   // polls: run start, block 0; fails before pass 1
		{4, 0, 1},   // pass 1 ran; fails before pass 2
		{6, 8, 3},   // block 0 done (polls 1–5); fails at block 1's start
		{8, 8, 4},   // block 1's pass 1 ran; fails before its pass 2
		{99, 16, 6}, // never: the whole run
	}
	for _, tc := range tests {
		polls, passes := 0, 0
		o.OnStep = func(StepInfo) { passes++ }
		o.Interrupt = func() error {
			if polls++; polls >= tc.stopAt {
				return cause
			}
			return nil
		}
		res, err := m.Generate(genPrompt, o)
		if tc.stopAt == 99 {
			if err != nil || !slices.Equal(res.Tokens, full.Tokens) {
				t.Errorf("never interrupted: %v, %v; want %v", res.Tokens, err, full.Tokens)
			}
			continue
		}
		if !errors.Is(err, ErrInterrupted) || !errors.Is(err, cause) {
			t.Errorf("stop at poll %d: error %v, want ErrInterrupted wrapping %q", tc.stopAt, err, cause)
		}
		if res == nil || len(res.Tokens) != tc.wantTokens || !slices.Equal(res.Tokens, full.Tokens[:tc.wantTokens]) || passes != tc.wantPasses {
			t.Errorf("stop at poll %d: tokens %v after %d passes, want %v after %d", tc.stopAt, res, passes, full.Tokens[:tc.wantTokens], tc.wantPasses)
		}
	}
}
