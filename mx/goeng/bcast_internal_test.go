package goeng

import (
	"fmt"
	"testing"

	"github.com/dgtune/dgtune/mx/internal/dims"
)

// TestBcastRowsVisitsEveryElement: after merging axes and cutting long runs, bcastRows
// still visits every output element exactly once, with the input offsets a plain
// multi-index walk gives — for same shapes, scalars, rows against columns, size-1 and
// size-0 axes and runs long enough to be cut.
func TestBcastRowsVisitsEveryElement(t *testing.T) {
	cases := []struct{ a, b []int }{
		{[]int{512, 8}, []int{512, 8}},
		{[]int{3, 4, 5}, []int{1}},
		{[]int{256, 1}, []int{256, 1024}},
		{[]int{2, 1, 3, 70000}, []int{2, 5, 3, 70000}},
		{[]int{7, 1, 9}, []int{1, 6, 1}},
		{[]int{1, 1, 40000}, []int{40000}},
		{[]int{4, 0, 3}, []int{1, 3}},
		{[]int{}, []int{}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.a, c.b), func(t *testing.T) {
			out := broadcastOut(c.a, c.b)
			sa, sb := broadcastStrides(c.a, out), broadcastStrides(c.b, out)
			n := dims.Numel(out)
			seen := make([]int, n)
			gotA, gotB := make([]int, n), make([]int, n)
			bcastRows(out, sa, sb, func(o, ia, ib, cnt, da, db int) {
				for i := range cnt {
					seen[o+i]++
					gotA[o+i], gotB[o+i] = ia+i*da, ib+i*db
				}
			})
			for flat := range n {
				if seen[flat] != 1 {
					t.Fatalf("element %d visited %d times", flat, seen[flat])
				}
				wa, wb, rem := 0, 0, flat
				for d := len(out) - 1; d >= 0; d-- {
					idx := rem % out[d]
					rem /= out[d]
					wa += idx * sa[d]
					wb += idx * sb[d]
				}
				if gotA[flat] != wa || gotB[flat] != wb {
					t.Fatalf("element %d: offsets (%d, %d), want (%d, %d)", flat, gotA[flat], gotB[flat], wa, wb)
				}
			}
		})
	}
}

// broadcastOut is the broadcast shape of a and b (numpy rules), for the test.
func broadcastOut(a, b []int) []int {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		out[i] = max(da, db)
		if da == 0 || db == 0 {
			out[i] = 0
		}
	}
	return out
}
