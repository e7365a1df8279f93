//go:build mlx

package mlxeng

import (
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestDequantizeKernelChoice: the kernel takes 4 and 8 bits in groups of 32, 64 and 128
// only, and is never made on the CPU or with MLXENG_DEQUANTIZE=mlx (the GPU cases run
// where the engine has a CUDA GPU).
func TestDequantizeKernelChoice(t *testing.T) {
	for _, c := range []struct {
		bits, group int
		want        bool
	}{{4, 64, true}, {4, 32, true}, {8, 128, true}, {2, 64, false}, {3, 64, false}, {6, 64, false}, {4, 16, false}, {8, 256, false}} {
		if got := dequantKernelParams(mx.QuantParams{Bits: c.bits, GroupSize: c.group}); got != c.want {
			t.Errorf("bits %d group %d: kernel %v, want %v", c.bits, c.group, got, c.want)
		}
	}
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env, device string
		want        bool
	}{{"mlx", "gpu", false}, {"", "cpu", false}, {"", "gpu", true}} {
		if c.want && !isCUDA(e.device) {
			continue
		}
		t.Setenv(dequantEnv, c.env)
		if _, got := newDequantKernel(c.device); got != c.want {
			t.Errorf("%s=%q on %s: kernel %v, want %v", dequantEnv, c.env, c.device, got, c.want)
		}
	}
}
