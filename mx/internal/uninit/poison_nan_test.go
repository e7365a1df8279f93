//go:build !purego && uninitnan

package uninit

import "testing"

// TestPoisonFillsNaN: in the uninitnan build every element of a large slice is NaN, so
// that an element a kernel leaves unwritten shows.
func TestPoisonFillsNaN(t *testing.T) {
	s := Float32s(1 << 20)
	for i, v := range s {
		if v == v {
			t.Fatalf("element %d is %v, want NaN", i, v)
		}
	}
}
