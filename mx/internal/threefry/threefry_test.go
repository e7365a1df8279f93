package threefry

import (
	"errors"
	"slices"
	"testing"
)

// Random123's kat_vectors for threefry2x32 with 20 rounds, as repeated in
// TensorFlow's stateful random tests (citing Boost.Random test_threefry.cpp)
// and in independent OCaml and C# ports: key, counter -> output.
func TestHashKnownAnswers(t *testing.T) {
	tests := []struct {
		key          Key
		c0, c1       uint32
		want0, want1 uint32
	}{
		{Key{0, 0}, 0, 0, 0x6b200159, 0x99ba4efe},
		{Key{0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7},
		{Key{0x13198a2e, 0x03707344}, 0x243f6a88, 0x85a308d3, 0xc4923a9c, 0x483df7a0},
	}
	for _, tt := range tests {
		g0, g1 := Hash(tt.key, tt.c0, tt.c1)
		if g0 != tt.want0 || g1 != tt.want1 {
			t.Errorf("Hash(%#x, %#x, %#x) = (%#x, %#x), want (%#x, %#x)",
				tt.key, tt.c0, tt.c1, g0, g1, tt.want0, tt.want1)
		}
	}
}

// MLX tests/random_tests.cpp "test random key": the seed's high word first.
func TestNewKey(t *testing.T) {
	tests := []struct {
		seed uint64
		want Key
	}{
		{0, Key{0, 0}},
		{1, Key{0, 1}},
		{1 << 32, Key{1, 0}},
		{1<<32 + 1, Key{1, 1}},
		{0xdeadbeef_cafef00d, Key{0xdeadbeef, 0xcafef00d}},
	}
	for _, tt := range tests {
		if got := NewKey(tt.seed); got != tt.want {
			t.Errorf("NewKey(%#x) = %v, want %v", tt.seed, got, tt.want)
		}
	}
}

// Expected values from MLX tests/random_tests.cpp "test random bits" (which
// MLX generated with JAX's threefry_prng_impl.random_bits).
func TestBitsMLXVectors(t *testing.T) {
	k0, k1 := NewKey(0), NewKey(1)
	u32 := []struct {
		key  Key
		n    int
		want []uint32
	}{
		// One word: odd count, so counter (0, 0); key (0,0) gives the first
		// known-answer output 0x6b200159 = 1797259609.
		{k0, 1, []uint32{1797259609}},
		{k1, 1, []uint32{507451445}},
		{k0, 3, []uint32{4146024105, 1351547692, 2718843009}},
		{k0, 0, []uint32{}},
	}
	for _, tt := range u32 {
		got, err := Bits(tt.key, tt.n)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Bits(%v, %d) = %v, %v, want %v", tt.key, tt.n, got, err, tt.want)
		}
	}
}

// The counter layout of MLX's RandomBits kernel, written out by hand for
// small counts: W words, h = W/2, odd = W%2; counter (i, i+h+odd) feeds
// words i and h+odd+i, and counter (h, 0) the middle word of an odd count.
func TestBitsLayout(t *testing.T) {
	k := Key{0x01234567, 0x89abcdef}
	h := func(c0, c1 uint32) [2]uint32 {
		a, b := Hash(k, c0, c1)
		return [2]uint32{a, b}
	}
	tests := []struct {
		n    int
		want []uint32
	}{
		{1, []uint32{h(0, 0)[0]}},
		{2, []uint32{h(0, 1)[0], h(0, 1)[1]}},
		{3, []uint32{h(0, 2)[0], h(1, 0)[0], h(0, 2)[1]}},
		{4, []uint32{h(0, 2)[0], h(1, 3)[0], h(0, 2)[1], h(1, 3)[1]}},
		{5, []uint32{h(0, 3)[0], h(1, 4)[0], h(2, 0)[0], h(0, 3)[1], h(1, 4)[1]}},
	}
	for _, tt := range tests {
		got, err := Bits(k, tt.n)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Bits(%v, %d) = %v, %v, want %v", k, tt.n, got, err, tt.want)
		}
	}
}

// MLX tests/random_tests.cpp "test random split".
func TestSplitMLXVectors(t *testing.T) {
	got, err := Split(NewKey(0), 2)
	want := []Key{{4146024105, 967050713}, {2718843009, 1272950319}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Split(key(0), 2) = %v, %v, want %v", got, err, want)
	}
	got, err = Split(NewKey(0), 3)
	want = []Key{{2467461003, 428148500}, {3186719485, 3840466878}, {2562233961, 1946702221}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Split(key(0), 3) = %v, %v, want %v", got, err, want)
	}
	got, err = Split(NewKey(0), 0)
	if err != nil || len(got) != 0 {
		t.Errorf("Split(key(0), 0) = %v, %v, want []", got, err)
	}
}

func TestSplitDeterministicAndDistinct(t *testing.T) {
	k := NewKey(12345)
	a, errA := Split(k, 16)
	b, errB := Split(k, 16)
	if errA != nil || errB != nil || !slices.Equal(a, b) {
		t.Fatalf("Split(%v, 16) not deterministic: %v / %v (%v, %v)", k, a, b, errA, errB)
	}
	seen := map[Key]bool{k: true}
	for _, s := range a {
		if seen[s] {
			t.Errorf("Split(%v, 16) repeats key %v", k, s)
		}
		seen[s] = true
	}
	p0, p1 := split2(k)
	two, _ := Split(k, 2)
	if two[0] != p0 || two[1] != p1 {
		t.Errorf("split2(%v) = %v, %v; Split(k, 2) = %v", k, p0, p1, two)
	}
}

// seed(0) gives state key(0) = (0, 0); the first keyless call splits it
// into the MLX split vectors above, keeps the first and uses the second.
func TestGlobal(t *testing.T) {
	g := NewGlobal(0)
	if got, want := g.Next(), (Key{2718843009, 1272950319}); got != want {
		t.Errorf("first Next after seed(0) = %v, want %v", got, want)
	}
	if got, want := g.State(), (Key{4146024105, 967050713}); got != want {
		t.Errorf("state after one Next = %v, want %v", got, want)
	}
	_, wantSecond := split2(Key{4146024105, 967050713})
	if got := g.Next(); got != wantSecond {
		t.Errorf("second Next = %v, want %v", got, wantSecond)
	}
	g.Seed(0)
	if got, want := g.Next(), (Key{2718843009, 1272950319}); got != want {
		t.Errorf("Next after reseeding = %v, want %v", got, want)
	}
	g.SetState(Key{0, 0})
	if got, want := g.Next(), (Key{2718843009, 1272950319}); got != want {
		t.Errorf("Next after SetState(key(0)) = %v, want %v", got, want)
	}
}

// The canvas of the reference goldens: mx.random.seed(0) then
// mx.random.randint(0, 262144, (1, 256)) (spec diffusiongemma.md §8).
func TestRandintGoldenCanvas(t *testing.T) {
	g := NewGlobal(0)
	ids, err := Randint(g.Next(), 256, 0, 262144)
	if err != nil {
		t.Fatal(err)
	}
	wantFirst := []int32{185000, 41720, 189586, 58903, 148497, 10569, 138740, 40704}
	wantLast := []int32{113009, 52994, 195024, 100784}
	if !slices.Equal(ids[:8], wantFirst) {
		t.Errorf("first ids = %v, want %v", ids[:8], wantFirst)
	}
	if !slices.Equal(ids[252:], wantLast) {
		t.Errorf("last ids = %v, want %v", ids[252:], wantLast)
	}
}

func TestBadCounts(t *testing.T) {
	k := NewKey(0)
	calls := map[string]func() error{
		"Bits":    func() error { _, err := Bits(k, -1); return err },
		"Split":   func() error { _, err := Split(k, -2); return err },
		"Uniform": func() error { _, err := Uniform(k, -1, 0, 1); return err },
		"Randint": func() error { _, err := Randint(k, -1, 0, 10); return err },
		"Normal":  func() error { _, err := Normal(k, -1, 0, 1); return err },
		"Gumbel":  func() error { _, err := Gumbel(k, -1); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrNegativeCount) {
			t.Errorf("%s with a negative count: err = %v, want ErrNegativeCount", name, err)
		}
	}
}
