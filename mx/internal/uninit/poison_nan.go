//go:build !purego && uninitnan

package uninit

import "math"

// poison fills a fresh slice with NaN in builds tagged uninitnan, so that a caller that
// reads an element it never wrote — a block its kernel does not cover — turns a test's
// values into NaN instead of passing on memory that happened to be zero.
func poison(s []float32) {
	nan := float32(math.NaN())
	for i := range s {
		s[i] = nan
	}
}
