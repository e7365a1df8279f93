package kernels_test

// The AdamW kernel's emulation compares with the go engine, which this external test
// package may import (package kernels may not: the mlx engine imports it).

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// adamHarness writes AdamHeader and AdamSource(len(shapes)) as a C++ function with the
// template constants given and each parameter's shape and axis count (as MLX declares
// them), and launch_all, which runs every thread of every block in turn (the kernel has
// no barriers) with the tensors' arrays in AdamInputs' and AdamOutputs' order
// (testdata/emu_adam.cpp calls it).
func adamHarness(shapes [][]int, decay bool, c [6]float32) string {
	n := len(shapes)
	var b strings.Builder
	b.WriteString("#include \"emu_prelude.h\"\n" + kernels.AdamHeader)
	var consts []string
	names := []string{"WD", "B1", "OMB1", "B2", "OMB2", "EPS"}
	for i, v := range c {
		consts = append(consts, fmt.Sprintf("constexpr int %s = %d;", names[i], int32(math.Float32bits(v))))
	}
	consts = append(consts, fmt.Sprintf("constexpr bool DECAY = %v;", decay))
	var sz, shapeVals []string
	for i, sh := range shapes {
		size := 1
		var dims []string
		for _, d := range sh {
			size *= d
			dims = append(dims, strconv.Itoa(d))
		}
		sz = append(sz, strconv.Itoa(size))
		shapeVals = append(shapeVals, fmt.Sprintf("const Shape shape%d{{%s}};", i, strings.Join(dims, ", ")))
	}
	fmt.Fprintf(&b, "%s\nconst size_t sizes[] = {%s};\n%s\n", strings.Join(consts, "\n"), strings.Join(sz, ", "), strings.Join(shapeVals, "\n"))
	var params, args []string
	for i, name := range kernels.AdamInputs(n) {
		params = append(params, "const float* "+name)
		if i == 0 {
			args = append(args, "lr")
			continue
		}
		// ins holds p, g, m, v of tensor 0, then of tensor 1, …; AdamInputs lists every p first
		args = append(args, fmt.Sprintf("ins[%d]", ((i-1)%n)*4+(i-1)/n))
		if t := i - 1; t < n { // a parameter: its shape and axis count follow it
			params = append(params, fmt.Sprintf("const Shape %s_shape", name), fmt.Sprintf("const int %s_ndim", name))
			args = append(args, fmt.Sprintf("shape%d", t), strconv.Itoa(len(shapes[t])))
		}
	}
	for i, name := range kernels.AdamOutputs(n) {
		params = append(params, "float* "+name)
		args = append(args, fmt.Sprintf("outs[%d]", (i%n)*3+i/n))
	}
	fmt.Fprintf(&b, "void body(%s) {\n%s}\n", strings.Join(params, ", "), kernels.AdamSource(n))
	fmt.Fprintf(&b, `void launch_all(const float* lr, const float* const* ins, float* const* outs, size_t blocks) {
  for (size_t bx = 0; bx < blocks; bx++)
    for (int t = 0; t < 256; t++) {
      blockIdx = {int(bx), 0, 0};
      threadIdx = {t, 0, 0};
      blockDim = {256, 1, 1};
      body(%s);
    }
}
`, strings.Join(args, ", "))
	return b.String()
}

// TestAdamKernelEmulated runs AdamSource on the CPU emulation for one tensor and for
// three whose elements straddle a block, of one, two and three axes (the kernel reads
// each size from its parameter's shape), with and without weight decay, and compares its
// new parameters and moments with the go engine's mx.AdamCompose (the composition MLX's
// apply_single computes op by op) bit for bit. The GPU test is mlxeng's
// TestAdamKernelMatchesComposition.
func TestAdamKernelEmulated(t *testing.T) {
	e := mxtest.Go(t)
	for _, shapes := range [][][]int{{{5, 8}}, {{37}, {16, 16}, {1, 1, 5}}} {
		var sizes []int
		for _, sh := range shapes {
			size := 1
			for _, d := range sh {
				size *= d
			}
			sizes = append(sizes, size)
		}
		for _, decay := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v_decay_%v", shapes, decay), func(t *testing.T) {
				const lr = float32(3e-3)
				c := mx.AdamConstants{LR: lr, B1: 0.9, OneMinusB1: float32(1 - 0.9), B2: 0.999, OneMinusB2: float32(1 - 0.999), Eps: 1e-8}
				if decay {
					c.HasDecay, c.WeightDecay, c.Decay = true, 0.05, 1-lr*0.05
				}
				cxx, dir := kernels.Emulation(t, adamHarness(shapes, decay, [6]float32{c.WeightDecay, c.B1, c.OneMinusB1, c.B2, c.OneMinusB2, c.Eps}), "emu_adam.cpp")
				rng := rand.New(rand.NewPCG(uint64(len(sizes)), 7))
				in := []float32{lr}
				var tensors [][4][]float32
				for _, n := range sizes {
					var ts [4][]float32
					for k, r := range [4][2]float32{{-2, 2}, {-0.5, 0.5}, {-0.1, 0.1}, {0, 0.2}} { // p, g, m, v
						ts[k] = make([]float32, n)
						for j := range ts[k] {
							ts[k][j] = r[0] + (r[1]-r[0])*rng.Float32()
							if k == 3 { // v over many magnitudes, so that g²'s term is not lost in the sum
								ts[k][j] *= float32(math.Pow(float64(rng.Float32()), 8))
							}
						}
						in = append(in, ts[k]...)
					}
					tensors = append(tensors, ts)
				}
				inPath, outPath := filepath.Join(dir, "in.bin"), filepath.Join(dir, "out.bin")
				if err := os.WriteFile(inPath, float32Bytes(in), 0o644); err != nil {
					t.Fatal(err)
				}
				kernels.RunEmulation(t, cxx, dir, "emu_adam.cpp", "adam", nil, []string{inPath, outPath}, nil)
				raw, err := os.ReadFile(outPath)
				if err != nil {
					t.Fatal(err)
				}
				got := bytesFloat32(raw)
				off := 0
				for i, ts := range tensors {
					n := sizes[i]
					arr := func(v []float32) *mx.Array { return mx.FromFloat32(e, v, n) }
					wp, wm, wv := mx.AdamCompose(arr(ts[0]), arr(ts[1]), arr(ts[2]), arr(ts[3]), mx.Scalar(e, float64(lr), mx.Float32), c)
					for k, want := range [][]float32{wp.Float32s(), wm.Float32s(), wv.Float32s()} {
						for j, w := range want {
							if g := got[off+k*n+j]; math.Float32bits(g) != math.Float32bits(w) {
								t.Fatalf("tensor %d output %d [%d]: kernel %v, composition %v", i, k, j, g, w)
							}
						}
					}
					off += 3 * n
				}
			})
		}
	}
}

func float32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func bytesFloat32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
