package diffusiongemma

import (
	"math"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func TestCanvasLength(t *testing.T) {
	tests := []struct {
		remaining, minC, maxC, model int
		full                         bool
		want                         int
	}{
		// §8.2 vectors: L = min(max, max(remaining, min)), or the model canvas when full.
		{300, 64, 256, 256, false, 256},
		{100, 64, 256, 256, false, 100},
		{10, 64, 256, 256, false, 64},
		{10, 64, 128, 256, true, 256},
		// A caller maximum below the model's caps the block; above it, the model wins.
		{300, 64, 128, 256, false, 128},
		{300, 64, 512, 256, false, 256},
		// maxCanvas 0 means the model canvas.
		{300, 64, 0, 256, false, 256},
		// The minimum is capped by the maximum: tiny preset, canvas 16, default min 64.
		{4, 64, 0, 16, false, 16},
		{4, 2, 0, 16, false, 4},
	}
	for _, tc := range tests {
		if got := CanvasLength(tc.remaining, tc.minC, tc.maxC, tc.model, tc.full); got != tc.want {
			t.Errorf("CanvasLength(%d, %d, %d, %d, %v) = %d, want %d", tc.remaining, tc.minC, tc.maxC, tc.model, tc.full, got, tc.want)
		}
	}
}

func TestScheduleTemperature(t *testing.T) {
	tests := []struct {
		step, steps int
		want        float64
	}{
		{48, 48, 0.8},               // first pass: t_max
		{24, 48, 0.6},               // halfway: 0.4 + 0.4·½
		{1, 48, 0.4 + 0.4/48},       // last pass ≈ 0.4083, not t_min
		{1, 1, 0.8},                 // a one-step budget runs only at t_max
		{3, 4, 0.4 + 0.4*(3.0/4.0)}, // 0.7
	}
	for _, tc := range tests {
		if got := ScheduleTemperature(tc.step, tc.steps, 0.4, 0.8); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("ScheduleTemperature(%d, %d, 0.4, 0.8) = %v, want %v", tc.step, tc.steps, got, tc.want)
		}
	}
}

func TestEntropyMask(t *testing.T) {
	e := mxtest.Go(t)
	tests := []struct {
		h    []float32
		beta float64
		want []bool
	}{
		// Sorted [0.01, 0.08, 0.2, 0.7]; cumsum − cummax = [0, 0.01, 0.09, 0.29] → first three.
		{[]float32{0.7, 0.01, 0.2, 0.08}, 0.1, []bool{false, true, true, true}},
		// Sorted [0.05, 0.1, 0.2, 0.4]; excess [0, 0.05, 0.15, 0.35] ≤ 0.16 → first three.
		{[]float32{0.4, 0.1, 0.2, 0.05}, 0.16, []bool{false, true, true, true}},
		// Sorted [8, 9]; excess [0, 8]: the lowest-entropy position is accepted regardless of β.
		{[]float32{8, 9}, 0.1, []bool{true, false}},
		// Sorted [0.25, 0.25, 0.5, 1] (positions 1, 2, 0, 3); excess [0, 0.25, 0.5, 1] ≤ 0.5
		// accepts the first three, all exact in binary.
		{[]float32{0.5, 0.25, 0.25, 1}, 0.5, []bool{true, true, true, false}},
		// β = 0 keeps only the minimum.
		{[]float32{3, 2, 1}, 0, []bool{false, false, true}},
	}
	for _, tc := range tests {
		got := EntropyMask(mx.FromFloat32(e, tc.h, 1, len(tc.h)), tc.beta).Bools()
		if !slices.Equal(got, tc.want) {
			t.Errorf("EntropyMask(%v, %g) = %v, want %v", tc.h, tc.beta, got, tc.want)
		}
	}
	// Rows are independent: the two first vectors stacked give both answers.
	h := mx.FromFloat32(e, []float32{0.7, 0.01, 0.2, 0.08, 8, 9, 0.5, 0.125}, 2, 4)
	// Row 2 sorted [0.125, 0.5, 8, 9]; excess [0, 0.125, 0.625, 8.625] ≤ 0.1 → only 0.125.
	want := []bool{false, true, true, true, false, false, false, true}
	if got := EntropyMask(h, 0.1).Bools(); !slices.Equal(got, want) {
		t.Errorf("EntropyMask(2 rows) = %v, want %v", got, want)
	}
}

func TestConfidenceMask(t *testing.T) {
	e := mxtest.Go(t)
	tests := []struct {
		name       string
		conf       []float32
		unrevealed []bool
		want       []bool
	}{
		// Position 0 clears 0.9; position 2 would too but is already revealed.
		{"threshold", []float32{0.95, 0.5, 0.92, 0.1}, []bool{true, true, false, true}, []bool{true, false, false, false}},
		// Nothing unrevealed clears 0.9: force the most confident unrevealed one (position 1,
		// 0.8), not the revealed 0.99.
		{"force best unrevealed", []float32{0.3, 0.8, 0.99, 0.6}, []bool{true, true, false, true}, []bool{false, true, false, false}},
		// Everything revealed: nothing to accept, nothing forced.
		{"all revealed", []float32{0.3, 0.99}, []bool{false, false}, []bool{false, false}},
		// conf ≥ τ is inclusive (both sides are float32(0.9)).
		{"inclusive", []float32{0.9, 0.2}, []bool{true, true}, []bool{true, false}},
		// Several qualify: all are accepted, no forcing.
		{"several", []float32{0.91, 0.2, 0.97}, []bool{true, true, true}, []bool{true, false, true}},
	}
	for _, tc := range tests {
		n := len(tc.conf)
		got := ConfidenceMask(mx.FromFloat32(e, tc.conf, 1, n), mx.FromBool(e, tc.unrevealed, 1, n), 0.9).Bools()
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: ConfidenceMask(%v, %v, 0.9) = %v, want %v", tc.name, tc.conf, tc.unrevealed, got, tc.want)
		}
	}
	// Forcing is decided per row: row 1 has a qualifier, row 2 forces its best (position 0).
	conf := mx.FromFloat32(e, []float32{0.95, 0.1, 0.5, 0.4}, 2, 2)
	unrev := mx.FromBool(e, []bool{true, true, true, true}, 2, 2)
	want := []bool{true, false, true, false}
	if got := ConfidenceMask(conf, unrev, 0.9).Bools(); !slices.Equal(got, want) {
		t.Errorf("ConfidenceMask(2 rows) = %v, want %v", got, want)
	}
}

func TestTokenProbabilityAndEntropy(t *testing.T) {
	e := mxtest.Go(t)
	// Row 1: logits [0, ln 3] → p = [¼, ¾]; H = −(¼ ln ¼ + ¾ ln ¾) = 0.5623351446.
	// Row 2: four equal logits → p = ¼ each; H = ln 4.
	p := mx.FromFloat32(e, []float32{0, float32(math.Log(3)), -50, -50, 2, 2, 2, 2}, 2, 4)
	// The -50 padding gives row 1 two extra classes of weight e^-50 relative to 1; their
	// effect on p and H is below float32 resolution.
	ids := mx.FromInt32(e, []int32{1, 3}, 2)
	prob := TokenProbability(p, ids).Float32s()
	h := TokenEntropy(p).Float32s()
	wantProb := []float64{0.75, 0.25}
	wantH := []float64{-(0.25*math.Log(0.25) + 0.75*math.Log(0.75)), math.Log(4)}
	for i := range 2 {
		if math.Abs(float64(prob[i])-wantProb[i]) > 1e-6 {
			t.Errorf("TokenProbability row %d = %v, want %v", i, prob[i], wantProb[i])
		}
		if math.Abs(float64(h[i])-wantH[i]) > 1e-6 {
			t.Errorf("TokenEntropy row %d = %v, want %v", i, h[i], wantH[i])
		}
	}
}

func TestProcessLogitsDivides(t *testing.T) {
	e := mxtest.Go(t)
	// 1/0.7 is not exact in float32, so x·(1/T) and x/T may differ; the reference divides.
	// For 5 and 10 they do: 5/0.7 = 7.142857 but 5·(1/0.7) = 7.1428576 in float32.
	x := []float32{1, 5, 10, 29.5}
	got := ProcessLogits(mx.FromFloat32(e, x, 4), 0.7).Float32s()
	for i, v := range x {
		if want := v / float32(0.7); got[i] != want {
			t.Errorf("ProcessLogits(%v, 0.7)[%d] = %v, want %v", v, i, got[i], want)
		}
	}
}

// The first draw of a key sequence seeded with 0 is MLX's first draw after
// mx.random.seed(0): the reference goldens' initial canvas (§8.1 forward-canvas).
func TestKeySequenceMatchesMLXGlobalKey(t *testing.T) {
	e := mxtest.Go(t)
	ks := newKeySequence(e, 0)
	ids := mx.Randint(ks.next(), []int{1, 256}, 0, 262144, mx.Int32).Int32s()
	wantFirst := []int32{185000, 41720, 189586, 58903, 148497, 10569, 138740, 40704}
	wantLast := []int32{113009, 52994, 195024, 100784}
	if !slices.Equal(ids[:8], wantFirst) || !slices.Equal(ids[252:], wantLast) {
		t.Errorf("seed-0 canvas = %v … %v, want %v … %v", ids[:8], ids[252:], wantFirst, wantLast)
	}
	// A second draw uses a different key.
	again := mx.Randint(ks.next(), []int{1, 256}, 0, 262144, mx.Int32).Int32s()
	if slices.Equal(ids, again) {
		t.Error("two draws from one key sequence are identical")
	}
}

func TestEmit(t *testing.T) {
	eos := map[int32]bool{1: true, 106: true}
	tests := []struct {
		canvas   []int32
		budget   int
		want     []int32
		wantUsed int
		wantStop bool
	}{
		// The EOS at index 2 ends generation and is not emitted, but it was produced.
		{[]int32{5, 7, 1, 9}, 10, []int32{5, 7}, 3, true},
		// The budget runs out before the EOS.
		{[]int32{5, 7, 1, 9}, 2, []int32{5, 7}, 2, false},
		// The budget's last token is the EOS: still a stop.
		{[]int32{5, 7, 106, 9}, 3, []int32{5, 7}, 3, true},
		// Only the first EOS matters.
		{[]int32{1, 106}, 5, nil, 1, true},
		// No EOS: the whole canvas.
		{[]int32{5, 7, 9}, 5, []int32{5, 7, 9}, 3, false},
	}
	for _, tc := range tests {
		got, used, stop := emit(tc.canvas, eos, tc.budget)
		if !slices.Equal(got, tc.want) || used != tc.wantUsed || stop != tc.wantStop {
			t.Errorf("emit(%v, budget %d) = %v, %d, %v; want %v, %d, %v", tc.canvas, tc.budget, got, used, stop, tc.want, tc.wantUsed, tc.wantStop)
		}
	}
}

func TestStability(t *testing.T) {
	a, b := []int32{1, 2}, []int32{1, 3}
	tests := []struct {
		threshold int
		seq       [][]int32
		want      []bool
	}{
		// Threshold 1: stable iff equal to the previous canvas (the first never is).
		{1, [][]int32{a, a, b, b, a}, []bool{false, true, false, true, false}},
		// Threshold 2: equal to both of the last two.
		{2, [][]int32{a, a, a, b, a, a}, []bool{false, false, true, false, false, false}},
		// Threshold 0: the empty history is full and agrees with everything.
		{0, [][]int32{a, b}, []bool{true, true}},
	}
	for _, tc := range tests {
		s := newStability(&StopRule{StabilityThreshold: tc.threshold})
		for i, c := range tc.seq {
			if got := s.observe(c); got != tc.want[i] {
				t.Errorf("threshold %d: observe #%d (%v) = %v, want %v", tc.threshold, i, c, got, tc.want[i])
			}
		}
	}
	// The history keeps copies: reusing one buffer for a changed canvas is not "stable".
	s := newStability(&StopRule{StabilityThreshold: 1})
	buf := []int32{4, 4}
	s.observe(buf)
	buf[1] = 5
	if s.observe(buf) {
		t.Error("observe reported a changed canvas as stable: history aliases the caller's slice")
	}
	if newStability(nil) != nil {
		t.Error("newStability(nil) should be nil (rule off)")
	}
}
