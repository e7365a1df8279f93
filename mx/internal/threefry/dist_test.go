package threefry

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

const twoM24 = 1.0 / (1 << 24) // 2^-24

// unit is float32(bits) / 2^32 clamped below 1. float32 keeps 24 bits, so
// near 2^32 it steps by 256 and rounds ties to even.
func TestUnit(t *testing.T) {
	tests := []struct {
		bits uint32
		want float32
	}{
		{0, 0},
		{1, 1.0 / (1 << 32)},
		{0x80000000, 0.5},
		// 2^32-129 is nearer 2^32-256: 1 - 2^-24, the largest float32 below 1.
		{0xFFFFFF7F, 1 - twoM24},
		// 2^32-128 ties between 2^32-256 (odd significand) and 2^32 (even):
		// 2^32, i.e. 1.0, which the clamp brings back to 1 - 2^-24.
		{0xFFFFFF80, 1 - twoM24},
		{0xFFFFFFFF, 1 - twoM24},
		// 1797259609 = 128*14041090 + 89 rounds up to 128*14041091.
		{1797259609, 14041091.0 / (1 << 25)},
	}
	for _, tt := range tests {
		if got := unit(tt.bits); got != tt.want {
			t.Errorf("unit(%#x) = %v, want %v", tt.bits, got, tt.want)
		}
	}
}

func TestUniformValues(t *testing.T) {
	// key(0), one value: bits 1797259609, f = 14041091/2^25, so
	// 2f - 1 = (14041091 - 2^24)/2^24 = -2736125/2^24, exact in float32.
	got, err := Uniform(NewKey(0), 1, -1, 1)
	if want := float32(-2736125.0 / (1 << 24)); err != nil || got[0] != want {
		t.Errorf("Uniform(key(0), 1, -1, 1) = %v, %v, want %v", got, err, want)
	}
	vals, err := Uniform(NewKey(7), 20000, -2, 3)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, v := range vals {
		if v < -2 || v >= 3 {
			t.Fatalf("Uniform value %v outside [-2, 3)", v)
		}
		sum += float64(v)
	}
	// Mean 0.5, standard error 5/sqrt(12*20000) ≈ 0.01.
	if mean := sum / float64(len(vals)); math.Abs(mean-0.5) > 0.05 {
		t.Errorf("Uniform mean = %v, want 0.5 ± 0.05", mean)
	}
}

func TestRandintEdges(t *testing.T) {
	tests := []struct {
		u         float32
		low, high int32
		want      int32
	}{
		{3.99, 0, 4, 3},
		{-1.5, -2, 5, -2}, // floor, not truncation toward zero
		{-1.5, -1, 5, -1}, // floor gives -2, clamped up to low
		{1 << 25, 0, 1 << 25, 1<<25 - 1},
		{float32(1 << 31), math.MaxInt32 - 10, math.MaxInt32, math.MaxInt32 - 1}, // saturates, then clamps
	}
	for _, tt := range tests {
		if got := randintFrom(tt.u, tt.low, tt.high); got != tt.want {
			t.Errorf("randintFrom(%v, %d, %d) = %d, want %d", tt.u, tt.low, tt.high, got, tt.want)
		}
	}
}

func TestRandintClampsToHighMinusOne(t *testing.T) {
	// float32 steps by 4 at 2^25, so u = 2^25 + 4f rounds to 2^25 when
	// 4f <= 2 (ties to the even 2^25) and to 2^25+4 = high otherwise;
	// high is clamped to high-1. Only low and high-1 can come out.
	const low, high = 1 << 25, 1<<25 + 4
	ids, err := Randint(NewKey(3), 2000, low, high)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]int{}
	for _, id := range ids {
		seen[id]++
	}
	if len(seen) != 2 || seen[low] == 0 || seen[high-1] == 0 {
		t.Errorf("Randint(%d, %d) drew %v, want only %d and %d", low, high, seen, low, high-1)
	}
	// Near MaxInt32 both bounds round to 2^31 in float32: every sample
	// saturates to MaxInt32 and is clamped to high-1.
	ids, err = Randint(NewKey(3), 50, math.MaxInt32-10, math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if id != math.MaxInt32-1 {
			t.Fatalf("Randint near MaxInt32 drew %d, want %d", id, math.MaxInt32-1)
		}
	}
}

func TestRandintRange(t *testing.T) {
	ids, err := Randint(NewKey(11), 7000, -3, 4)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int32]int{}
	for _, id := range ids {
		if id < -3 || id >= 4 {
			t.Fatalf("Randint(-3, 4) drew %d", id)
		}
		counts[id]++
	}
	// 7 values, 1000 expected each, binomial sd ≈ 29.
	for v := int32(-3); v < 4; v++ {
		if c := counts[v]; c < 850 || c > 1150 {
			t.Errorf("Randint(-3, 4): %d drawn %d times, want 1000 ± 150", v, c)
		}
	}
}

func TestBadRanges(t *testing.T) {
	k := NewKey(0)
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, r := range [][2]float32{{1, 1}, {2, 1}, {nan, 1}, {0, nan}, {-inf, 0}, {0, inf}} {
		if _, err := Uniform(k, 3, r[0], r[1]); err == nil {
			t.Errorf("Uniform(low=%v, high=%v) succeeded, want error", r[0], r[1])
		}
	}
	for _, r := range [][2]int32{{5, 5}, {6, 5}} {
		if _, err := Randint(k, 3, r[0], r[1]); err == nil {
			t.Errorf("Randint(low=%d, high=%d) succeeded, want error", r[0], r[1])
		}
	}
}

// float32 fma must round once. a*b+c = 1 + 2^-24 + 2^-70 here: just above
// the midpoint between 1 and 1+2^-23, so the answer is 1+2^-23. Rounding
// to float64 first drops 2^-70, leaves the exact midpoint, and ties-to-even
// then gives 1.
func TestFMA32(t *testing.T) {
	one23 := float32(1 + 2*twoM24) // 1 + 2^-23
	tests := []struct {
		a, b, c, want float32
	}{
		{2, 3, 1, 7},
		{one23, -(1 - 2*twoM24) * twoM24, one23, one23},
		// (1-2^-24)² = 1 - 2^-23 + 2^-48; 1 minus that is 2^-23 - 2^-48,
		// the midpoint between 2^-23 - 2^-47 (odd) and 2^-23 (even).
		{1 - twoM24, -(1 - twoM24), 1, 2 * twoM24},
		{float32(math.Inf(1)), 1, 1, float32(math.Inf(1))},
		{0, 5, -0.25, -0.25},
	}
	for _, tt := range tests {
		if got := fma32(tt.a, tt.b, tt.c); got != tt.want {
			t.Errorf("fma32(%g, %g, %g) = %g, want %g", tt.a, tt.b, tt.c, got, tt.want)
		}
	}
	// The second case really does defeat double rounding.
	if naive := float32(math.FMA(float64(tests[1].a), float64(tests[1].b), float64(tests[1].c))); naive == one23 {
		t.Errorf("double-rounded fma gave %g; case no longer exercises round-to-odd", naive)
	}
}

// fma32 against exact big.Float arithmetic, with c chosen to cancel most of
// a*b so that results sit near float32 midpoints.
func TestFMA32Exact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func() float32 {
		return float32(math.Ldexp(r.Float64()+0.5, r.IntN(40)-20)) * float32(1-2*r.IntN(2))
	}
	for i := 0; i < 3000; i++ {
		a, b := rnd(), rnd()
		var c float32
		switch i % 3 {
		case 0:
			c = rnd()
		case 1:
			c = -float32(float64(a) * float64(b))
		default:
			c = -float32(float64(a)*float64(b)) * (1 + float32(r.IntN(5))*twoM24)
		}
		exact := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		exact.Mul(exact, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		exact.Add(exact, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		want, _ := exact.Float32()
		if got := fma32(a, b, c); got != want {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
}

func ulpDiff(a, b float32) int64 {
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if (ia < 0) != (ib < 0) || math.Signbit(float64(a)) != math.Signbit(float64(b)) {
		return math.MaxInt64
	}
	if ia > ib {
		return ia - ib
	}
	return ib - ia
}

// MLX's polynomial is accurate to about 2.36 ulp; 3 ulp from float64's
// erfinv covers both branches (|log(1-x²)| > 6.125 once |x| > 0.9989).
func TestErfinv(t *testing.T) {
	if got := Erfinv(0); got != 0 {
		t.Errorf("Erfinv(0) = %v, want 0", got)
	}
	xs := []float32{0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999994, 1e-6}
	for i := 0; i <= 2000; i++ {
		xs = append(xs, float32(i)/2001)
	}
	for _, x := range xs {
		want := float32(math.Erfinv(float64(x)))
		if got := Erfinv(x); ulpDiff(got, want) > 3 {
			t.Fatalf("Erfinv(%v) = %v, want %v within 3 ulp", x, got, want)
		}
		if Erfinv(-x) != -Erfinv(x) {
			t.Fatalf("Erfinv(-%v) = %v, not -Erfinv(%v) = %v", x, Erfinv(-x), x, -Erfinv(x))
		}
	}
}

func TestNormal(t *testing.T) {
	// key(0): f = 14041091/2^25. Normal's uniform runs from
	// low = -(1 - 2^-24) with range float32(2 - 2^-24) = 2 (a tie, to
	// even), so u = 2f - 1 + 2^-24 = -2736124/2^24. The sample is
	// sqrt(2)*erfinv(u), the standard normal quantile of (1+u)/2.
	got, err := Normal(NewKey(0), 1, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := float32(math.Sqrt2 * math.Erfinv(-2736124.0/(1<<24)))
	if ulpDiff(got[0], want) > 4 {
		t.Errorf("Normal(key(0), 1) = %v, want %v within 4 ulp", got[0], want)
	}

	moments := func(xs []float32) (mean, variance float64) {
		for _, x := range xs {
			mean += float64(x)
		}
		mean /= float64(len(xs))
		for _, x := range xs {
			variance += (float64(x) - mean) * (float64(x) - mean)
		}
		return mean, variance / float64(len(xs))
	}
	tests := []struct{ loc, scale float32 }{{0, 1}, {2, 3}}
	for _, tt := range tests {
		xs, err := Normal(NewKey(5), 20000, tt.loc, tt.scale)
		if err != nil {
			t.Fatal(err)
		}
		m, v := moments(xs)
		// Standard errors for n = 20000: mean σ/141, sd about σ/200.
		if math.Abs(m-float64(tt.loc)) > 0.04*float64(tt.scale) {
			t.Errorf("Normal(%v, %v) mean = %v", tt.loc, tt.scale, m)
		}
		if math.Abs(math.Sqrt(v)-float64(tt.scale)) > 0.03*float64(tt.scale) {
			t.Errorf("Normal(%v, %v) sd = %v", tt.loc, tt.scale, math.Sqrt(v))
		}
	}
}

func TestGumbel(t *testing.T) {
	// key(0): f = 14041091/2^25, sample -log(-log f).
	got, err := Gumbel(NewKey(0), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := float32(-math.Log(-math.Log(14041091.0 / (1 << 25))))
	if ulpDiff(got[0], want) > 2 {
		t.Errorf("Gumbel(key(0), 1) = %v, want %v within 2 ulp", got[0], want)
	}
	xs, err := Gumbel(NewKey(9), 20000)
	if err != nil {
		t.Fatal(err)
	}
	var mean, sq float64
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sq += (float64(x) - mean) * (float64(x) - mean)
	}
	// Standard Gumbel: mean = Euler's γ ≈ 0.5772, variance = π²/6 ≈ 1.645.
	if math.Abs(mean-0.5772) > 0.05 {
		t.Errorf("Gumbel mean = %v, want 0.577 ± 0.05", mean)
	}
	if v := sq / float64(len(xs)); math.Abs(v-math.Pi*math.Pi/6) > 0.15 {
		t.Errorf("Gumbel variance = %v, want 1.645 ± 0.15", v)
	}
}

// RandintTrunc is MLX's randint before v0.32.1: the same uniforms, truncated toward zero
// after max(u, low), with no clamp below high.
func TestRandintTrunc(t *testing.T) {
	k := NewKey(11)
	const n = 7000
	u, err := Uniform(k, n, -3, 4)
	if err != nil {
		t.Fatal(err)
	}
	old, err := RandintTrunc(k, n, -3, 4)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := Randint(k, n, -3, 4)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range u {
		// Computed here from the uniform alone: truncation toward zero.
		if want := int32(u[i]); old[i] != want {
			t.Fatalf("RandintTrunc[%d] = %d for u = %v, want %d", i, old[i], u[i], want)
		}
		whole := u[i] == float32(math.Floor(float64(u[i])))
		switch {
		case u[i] >= 0 || whole:
			if old[i] != cur[i] {
				t.Errorf("u = %v: old %d, current %d; want equal", u[i], old[i], cur[i])
			}
		case old[i] != cur[i]+1:
			t.Errorf("u = %v: old %d, current %d; want current + 1", u[i], old[i], cur[i])
		default:
			differ++
		}
	}
	// u in (-3, 0) is 3/7 of the draws: about 3000 differ. Truncation folds (-1, 1) onto
	// 0, so 0 comes out twice as often and -3 almost never.
	if differ < 2700 || differ > 3300 {
		t.Errorf("%d of %d draws differ between the two rules, want about 3000", differ, n)
	}
	// Where float32 rounds u up to high, the old rule returns high (no clamp).
	const low, high = 1 << 25, 1<<25 + 4
	ids, err := RandintTrunc(NewKey(3), 2000, low, high)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]int{}
	for _, id := range ids {
		seen[id]++
	}
	if len(seen) != 2 || seen[low] == 0 || seen[high] == 0 {
		t.Errorf("RandintTrunc(%d, %d) drew %v, want only %d and %d", low, high, seen, low, high)
	}
	if _, err := RandintTrunc(k, 3, 5, 5); err == nil {
		t.Error("RandintTrunc(5, 5) succeeded, want error")
	}
}
