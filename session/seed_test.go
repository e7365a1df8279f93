package session

import "testing"

// TestDeriveSeed pins the derivation: every noise key, shuffle and LoRA init of a run
// comes from it, so a change here changes every trained adapter (and breaks resuming a
// run begun by an older build). No parts is the golden ratio constant itself; each part
// goes through one SplitMix64 finaliser.
func TestDeriveSeed(t *testing.T) {
	for _, c := range []struct {
		parts []uint64
		want  uint64
	}{
		{nil, 0x9e3779b97f4a7c15},
		{[]uint64{0}, 0xac2148d9c5bb8f75},
		{[]uint64{7, 1}, 0x6eea12a4bbb734cc},
		{[]uint64{7, 3, 1, 0, 2}, 0x19fc0de24fb61bde},
	} {
		if got := DeriveSeed(c.parts...); got != c.want {
			t.Errorf("DeriveSeed(%v) = %#x, want %#x", c.parts, got, c.want)
		}
	}
	// Neighbouring examples get unrelated keys: not equal, and no shared high half.
	a, b := DeriveSeed(7, 3, 1, 0, 2), DeriveSeed(7, 3, 1, 0, 3)
	if a == b || a>>32 == b>>32 {
		t.Errorf("DeriveSeed of neighbouring examples: %#x and %#x", a, b)
	}
}
