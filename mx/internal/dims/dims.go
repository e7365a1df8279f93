// Package dims is the shape arithmetic the go engine and the shape-only engine share, so
// that the shapes the estimate records are the ones the go engine makes.
package dims

import "slices"

// Numel is the number of elements of an array of shape s (1 for a scalar).
func Numel(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Reduced is shape with the axes removed, or kept as 1 when keep is set.
func Reduced(shape, axes []int, keep bool) []int {
	var out []int
	for i, d := range shape {
		if slices.Contains(axes, i) {
			if keep {
				out = append(out, 1)
			}
			continue
		}
		out = append(out, d)
	}
	return out
}

// Slice is the shape of x[start:stop:step] (positive steps, bounds already clipped).
func Slice(start, stop, step []int) []int {
	s := make([]int, len(start))
	for i := range s {
		s[i] = (stop[i] - start[i] + step[i] - 1) / step[i]
	}
	return s
}

// IsIdentity reports whether the permutation axes leaves every axis in place.
func IsIdentity(axes []int) bool {
	for i, a := range axes {
		if a != i {
			return false
		}
	}
	return true
}

// Contiguous reports whether the sorted axes are consecutive.
func Contiguous(axes []int) bool {
	for i := 1; i < len(axes); i++ {
		if axes[i] != axes[i-1]+1 {
			return false
		}
	}
	return true
}
