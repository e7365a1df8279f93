package diffusiongemma

import "testing"

// TestDecoderKeyStart pins §3.6.2's key window: full layers see every encoded position,
// sliding layers the last window−1 of them (all of them while there are no more).
func TestDecoderKeyStart(t *testing.T) {
	cases := []struct {
		name    string
		full    bool
		window  int
		encoded int
		want    int
	}{
		{"full layer, long prompt", true, 8, 100, 0},
		{"sliding, nothing encoded", false, 8, 0, 0},
		{"sliding, shorter than window−1", false, 8, 5, 0},
		{"sliding, exactly window−1", false, 8, 7, 0},
		{"sliding, exactly window", false, 8, 8, 1},
		{"sliding, long prompt", false, 8, 100, 93},
		{"sliding, window 1 sees no encoder key", false, 1, 4, 4},
		{"sliding, window 1024 at 2000 tokens", false, 1024, 2000, 977},
		{"non-positive window reads as none", false, 0, 100, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc := &TextConfig{SlidingWindow: c.window}
			if got := tc.decoderKeyStart(c.full, c.encoded); got != c.want {
				t.Errorf("decoderKeyStart(full=%v, encoded=%d) with window %d = %d, want %d",
					c.full, c.encoded, c.window, got, c.want)
			}
			if !c.full && c.window > 0 && c.encoded-c.want != min(c.encoded, c.window-1) {
				t.Errorf("keeps %d positions, want min(encoded, window−1) = %d", c.encoded-c.want, min(c.encoded, c.window-1))
			}
		})
	}
}
