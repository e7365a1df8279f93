//go:build mlx

package mlxeng

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestExpertOrderKernelChoice: the expert-order kernel is made only on CUDA and there
// unless MLXENG_EXPERT_ORDER=mlx (the CUDA case runs where the engine has CUDA).
func TestExpertOrderKernelChoice(t *testing.T) {
	checkKernelSwitch(t, expertOrderEnv, []kernelSwitch{{"cpu", "", false}, {"cpu", "mlx", false}, {"gpu", "", true}, {"gpu", "kernel", true}, {"gpu", "mlx", false}},
		func(device, value string) bool {
			_, ok := newExpertOrderKernel(device, value)
			return ok
		})
}

// TestExpertOrderMatchesArgsort: mx.ExpertOrder gives the stable argsort of the ids and
// its inverse, exactly — on MLX's CPU through the two argsorts, and on a CUDA GPU through
// the kernel as well (the real 26B-A4B geometry's 3,072 pairs of 128 experts, a count
// that is not a multiple of the block's 1024 with 1024 experts, one id, more experts than
// the kernel takes), against the argsorts.
func TestExpertOrderMatchesArgsort(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	kernels := []bool{false}
	if isCUDA(e.device) {
		k, ok := newExpertOrderKernel(e.device, "kernel")
		if !ok {
			t.Fatal("could not make the expert-order kernel")
		}
		savedK, savedOK := e.expertOrderKernel, e.expertOrderOK
		t.Cleanup(func() { e.expertOrderKernel, e.expertOrderOK = savedK, savedOK })
		e.expertOrderKernel = k
		kernels = append(kernels, true)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ n, experts int }{{3072, 128}, {2500, 1024}, {1, 8}, {700, 2000}} {
		ids := make([]int32, c.n)
		for i := range ids {
			ids[i] = int32(rng.IntN(max(c.experts/4, 1))) // a quarter of the experts: ties and empty ones
		}
		want := make([]int32, c.n)
		for i := range want {
			want[i] = int32(i)
		}
		slices.SortStableFunc(want, func(a, b int32) int { return int(ids[a]) - int(ids[b]) })
		for _, kernel := range kernels {
			t.Run(fmt.Sprintf("n%d_e%d_kernel%v", c.n, c.experts, kernel), func(t *testing.T) {
				e.expertOrderOK = kernel
				order, inverse := mx.ExpertOrder(mx.FromInt32(e, ids, c.n), c.experts)
				o, inv := order.Int32s(), inverse.Int32s()
				if !slices.Equal(o, want) {
					t.Fatalf("order differs from the stable argsort (first 8: %v, want %v)", o[:min(8, c.n)], want[:min(8, c.n)])
				}
				for p, i := range o {
					if inv[i] != int32(p) {
						t.Fatalf("inverse[%d] = %d, want %d", i, inv[i], p)
					}
				}
			})
		}
	}
}
