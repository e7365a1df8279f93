package threefry

import (
	"math"
	"slices"
	"testing"
)

var negInf = float32(math.Inf(-1))

// With a single finite logit per distribution, Gumbel noise cannot move the
// argmax (finite + noise > -Inf), whatever the key.
func TestCategoricalGumbelLayout(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		shape  []int
		axis   int
		want   []uint32
	}{
		{"rows", []float32{negInf, 5, negInf, 0, negInf, negInf}, []int{2, 3}, -1, []uint32{1, 0}},
		// axis 0 of (3, 2): column j is logits[j], logits[2+j], logits[4+j].
		{"columns", []float32{negInf, 7, negInf, negInf, 1, negInf}, []int{3, 2}, 0, []uint32{2, 0}},
		{"middle", []float32{negInf, negInf, 0, negInf, negInf, 0, 0, negInf}, []int{2, 2, 2}, 1, []uint32{1, 0, 1, 0}},
		{"1-D", []float32{negInf, negInf, 3}, []int{3}, 0, []uint32{2}},
	}
	for _, tt := range tests {
		for seed := uint64(0); seed < 5; seed++ {
			got, err := Categorical(NewKey(seed), tt.logits, tt.shape, tt.axis)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("%s: Categorical(seed %d) = %v, %v, want %v", tt.name, seed, got, err, tt.want)
			}
		}
	}
}

// Four equal logits: weights 1, cdf (0, 1, 2, 3), total 4. key(0) gives
// u = 14041091/2^25 ≈ 0.418, t = 4u ≈ 1.674, two cdf entries <= t: index 1.
func TestCategoricalInverseCDF(t *testing.T) {
	logits := []float32{0.5, 0.5, 0.5, 0.5}
	got, err := Categorical(NewKey(0), logits, []int{1, 4}, -1)
	if err != nil || !slices.Equal(got, []uint32{1}) {
		t.Errorf("Categorical(key(0), equal (1,4)) = %v, %v, want [1]", got, err)
	}
	// The same logits as a 1-D array take the Gumbel path instead: the first maximum
	// of logits + Gumbel(key), written out here.
	a, _ := Categorical(NewKey(4), logits, []int{4}, 0)
	g, _ := Gumbel(NewKey(4), 4)
	best := 0
	for c := range logits {
		if logits[c]+g[c] > logits[best]+g[best] {
			best = c
		}
	}
	if !slices.Equal(a, []uint32{uint32(best)}) {
		t.Errorf("1-D Categorical = %v, argmax(logits + gumbel) = %d; want the Gumbel path", a, best)
	}
	// Infinite maximum: only the +Inf entries carry weight.
	inf := float32(math.Inf(1))
	counts := [3]int{}
	for seed := range uint64(200) {
		d, err := Categorical(NewKey(seed), []float32{inf, 0, inf}, []int{1, 3}, -1)
		if err != nil {
			t.Fatal(err)
		}
		counts[d[0]]++
	}
	if counts[1] != 0 || counts[0] == 0 || counts[2] == 0 {
		t.Errorf("draws over logits (+Inf, 0, +Inf) = %v, want only 0 and 2", counts)
	}
}

// Frequencies for p = (0.1, 0.2, 0.7) through both paths; sd of each
// frequency over 6000 draws is at most 0.006.
func TestCategoricalFrequencies(t *testing.T) {
	p := []float64{0.1, 0.2, 0.7}
	row := make([]float32, 3)
	for i, v := range p {
		row[i] = float32(math.Log(v)) + 2 // shift: categorical ignores it
	}
	const n = 6000
	check := func(name string, draws []uint32) {
		t.Helper()
		counts := make([]int, 3)
		for _, d := range draws {
			counts[d]++
		}
		for i := range p {
			if f := float64(counts[i]) / float64(len(draws)); math.Abs(f-p[i]) > 0.03 {
				t.Errorf("%s: frequency of %d = %v, want %v ± 0.03", name, i, f, p[i])
			}
		}
	}
	rows := make([]float32, 0, 3*n)
	for i := 0; i < n; i++ {
		rows = append(rows, row...)
	}
	draws, err := Categorical(NewKey(21), rows, []int{n, 3}, -1)
	if err != nil {
		t.Fatal(err)
	}
	check("gumbel path", draws)
	// One distribution of shape (1, 3) per key takes the inverse-CDF path.
	draws = draws[:0]
	for seed := range uint64(n) {
		d, err := Categorical(NewKey(1000+seed), row, []int{1, 3}, 1)
		if err != nil {
			t.Fatal(err)
		}
		draws = append(draws, d...)
	}
	check("inverse-cdf path", draws)
}

func TestCategoricalBadInput(t *testing.T) {
	k := NewKey(0)
	tests := []struct {
		name   string
		logits []float32
		shape  []int
		axis   int
	}{
		{"scalar", []float32{1}, nil, 0},
		{"axis too large", []float32{1, 2}, []int{2}, 1},
		{"axis too small", []float32{1, 2}, []int{2}, -2},
		{"length mismatch", []float32{1, 2, 3}, []int{2, 2}, 0},
		{"negative dim", []float32{}, []int{-1, 2}, 1},
		{"no categories", []float32{}, []int{2, 0}, 1},
	}
	for _, tt := range tests {
		if _, err := Categorical(k, tt.logits, tt.shape, tt.axis); err == nil {
			t.Errorf("Categorical(%s) succeeded, want error", tt.name)
		}
	}
}
