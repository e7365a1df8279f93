package dims

import (
	"slices"
	"testing"
)

func TestDims(t *testing.T) {
	if got := Numel(nil); got != 1 {
		t.Errorf("Numel(nil) = %d, want 1", got)
	}
	if got := Numel([]int{2, 3, 4}); got != 24 {
		t.Errorf("Numel([2 3 4]) = %d, want 24", got)
	}
	for _, tc := range []struct {
		shape, axes []int
		keep        bool
		want        []int
	}{
		{[]int{2, 3, 4}, []int{1}, false, []int{2, 4}},
		{[]int{2, 3, 4}, []int{1}, true, []int{2, 1, 4}},
		{[]int{2, 3, 4}, []int{0, 2}, false, []int{3}},
		{[]int{5}, []int{0}, false, nil},
	} {
		if got := Reduced(tc.shape, tc.axes, tc.keep); !slices.Equal(got, tc.want) {
			t.Errorf("Reduced(%v, %v, %v) = %v, want %v", tc.shape, tc.axes, tc.keep, got, tc.want)
		}
	}
	// [1:8:3] holds 1, 4, 7; [0:4:1] four; [2:3:5] one.
	if got := Slice([]int{1, 0, 2}, []int{8, 4, 3}, []int{3, 1, 5}); !slices.Equal(got, []int{3, 4, 1}) {
		t.Errorf("Slice = %v, want [3 4 1]", got)
	}
	if !IsIdentity([]int{0, 1, 2}) || IsIdentity([]int{0, 2, 1}) {
		t.Error("IsIdentity wrong on [0 1 2] or [0 2 1]")
	}
	if !Contiguous([]int{1, 2, 3}) || Contiguous([]int{0, 2}) || !Contiguous(nil) {
		t.Error("Contiguous wrong on [1 2 3], [0 2] or []")
	}
}
