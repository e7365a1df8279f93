package uninit

import (
	"runtime"
	"testing"
)

// TestFloat32s: the slice has the asked length and capacity, is writable and readable
// across its whole length, survives collections while referenced, and sizes around the
// small/large threshold both work.
func TestFloat32s(t *testing.T) {
	for _, n := range []int{0, 1, minBytes/4 - 1, minBytes / 4, 1 << 20} {
		s := Float32s(n)
		if len(s) != n || cap(s) < n {
			t.Fatalf("n=%d: len %d cap %d", n, len(s), cap(s))
		}
		for i := range s {
			s[i] = float32(i)
		}
		runtime.GC()
		runtime.GC()
		for i, v := range s {
			if v != float32(i) {
				t.Fatalf("n=%d: element %d is %v after collections, want %d", n, i, v, i)
			}
		}
	}
}

// TestFloat32sIsCollected: dropped slices are returned to the heap (allocating far more
// than the heap would hold if they leaked keeps the live heap small).
func TestFloat32sIsCollected(t *testing.T) {
	var ms runtime.MemStats
	for range 200 {
		s := Float32s(4 << 20) // 16 MiB each, 3.2 GiB in all
		s[len(s)-1] = 1
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > 512<<20 {
		t.Fatalf("live heap %d MiB after dropping every slice", ms.HeapAlloc>>20)
	}
}
