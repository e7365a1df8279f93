package goeng_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestFromBytesRoundTrip: every storage dtype's bytes go in and come back unchanged
// (safetensors' little-endian layout), whatever the bits — NaN payloads, subnormals and
// negative zeros included, since random bytes hit them all.
func TestFromBytesRoundTrip(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []mx.DType{mx.Float32, mx.Float16, mx.BFloat16, mx.Float64, mx.Int32, mx.Int64, mx.Uint32, mx.Uint8} {
		for _, n := range []int{0, 1, 7, 4099} {
			b := make([]byte, n*dt.Size())
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if got := mx.Bytes(mx.FromBytes(e, b, []int{n}, dt)); !bytes.Equal(got, b) {
				t.Errorf("FromBytes(%s, %d elements) then Bytes changed the bytes", dt, n)
			}
		}
	}
}
