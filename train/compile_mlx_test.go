//go:build mlx

package train

import (
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
)

// TestCompileMatchesUncompiledMLX: on the mlx engine compile: true runs mlx.compile
// (one trace per prompt and canvas length, then replays) and trains the uncompiled
// run's adapter, dense and 4-bit.
func TestCompileMatchesUncompiledMLX(t *testing.T) {
	for _, bits := range []string{dg.BitsNone, dg.Bits4} {
		t.Run("bits="+bits, func(t *testing.T) { compiledAgainstUncompiled(t, "mlx", bits) })
	}
}
