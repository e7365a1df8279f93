package kernels

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// emulation prepares a CPU emulation of a kernel: the testdata files named and the
// harness text (the kernel inside C++ function templates) as emu_kernel.h in a fresh
// directory. It skips the test where there is no g++ to build it.
func emulation(t *testing.T, harness string, files ...string) (cxx, dir string) {
	t.Helper()
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ to build the emulation")
	}
	dir = t.TempDir()
	for _, f := range append([]string{"emu_prelude.h"}, files...) {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "emu_kernel.h"), []byte(harness), 0o644); err != nil {
		t.Fatal(err)
	}
	return cxx, dir
}

// runEmulation builds dir/src as the binary name with the compiler flags given (C++20,
// -O1, no contraction of float multiply-adds, threads) and runs it with args and the
// extra environment; it returns the output and fails the test if either step fails.
func runEmulation(t *testing.T, cxx, dir, src, name string, flags, args, env []string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	build := exec.Command(cxx, append(append([]string{"-std=c++20", "-O1", "-pthread", "-ffp-contract=off", "-Wno-unknown-pragmas"},
		flags...), filepath.Join(dir, src), "-o", bin)...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the emulation: %v\n%s", err, out)
	}
	run := exec.Command(bin, args...)
	run.Env = append(os.Environ(), env...)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return string(out)
}

// emulationHarness wraps a kernel body in a C++ function template and launches it on
// the emulation one block at a time, the block's 128 threads as std::threads.
const emulationHarness = `#include "emu_prelude.h"
template <bool TRANS, int NJ, int NC>
void body(const __nv_bfloat16* x, const uint32_t* w, const __nv_bfloat16* scales, const __nv_bfloat16* biases,
          const int32_t* idx, const Shape idx_shape, __nv_bfloat16* out) {
%s
}
template <bool TRANS, int NJ, int NC>
void launch(int experts, int z, const __nv_bfloat16* x, const uint32_t* w, const __nv_bfloat16* s, const __nv_bfloat16* b,
            const int32_t* idx, int rows, __nv_bfloat16* out) {
  Shape sh{};
  sh.d[0] = rows;
  for (int bz = 0; bz < z; bz++)
  for (int by = 0; by < experts; by++)
    for (int bx = 0; bx < NJ / 64; bx++) {
      std::barrier<> bar(128);
      emu_bar = &bar;
      std::vector<std::thread> ts;
      for (int t = 0; t < 128; t++)
        ts.emplace_back([&, t] {
          threadIdx = {t, 0, 0};
          blockIdx = {bx, by, bz};
          gridDim = {NJ / 64, experts, z};
          body<TRANS, NJ, NC>(x, w, s, b, idx, sh, out);
        });
      for (auto& t : ts) t.join();
    }
}
`

// expertsEmulationCases are the shapes the experts kernels run on the emulation: experts
// with no rows, one row, rows spanning two and three 32-row tiles, contractions of one to
// four 64-wide slices (and the real geometry's 704 and 2816), inputs off the 16-byte
// boundary, and blocks sharing an expert's tiles (grid z).
var expertsEmulationCases = []struct {
	experts, n, k int
	rows          []int // of each expert, in order
	shift         bool  // x and g start one element off the 16-byte boundary
	z             int   // blocks sharing an expert's 32-row tiles (grid z)
}{
	{5, 192, 128, []int{3, 0, 40, 1, 26}, false, 1},
	{5, 192, 128, []int{3, 0, 40, 1, 26}, false, 2},
	{3, 64, 64, []int{1, 65, 0}, false, 1},
	{3, 64, 64, []int{1, 65, 0}, false, 3},
	{3, 64, 64, []int{1, 65, 0}, false, 5}, // more blocks than tiles
	{2, 128, 256, []int{0, 33}, false, 1},
	{2, 128, 256, []int{0, 33}, true, 1},
	{2, 2816, 704, []int{31, 33}, false, 1}, // the real 26B-A4B geometry's down projection
}

// TestExpertsKernelEmulated runs ExpertsSource (WMMA through a shared-memory tile) and
// ExpertsMMASource (mma.sync on operands built in registers), forward and input
// gradient, on the CPU emulation (testdata/emu_prelude.h) for expertsEmulationCases,
// against float64 products (testdata/emu_experts.cpp). The GPU test is mlxeng's
// TestFusedExpertsMatchExact.
func TestExpertsKernelEmulated(t *testing.T) {
	for _, kernel := range []struct{ name, source string }{{"wmma", ExpertsSource}, {"mma", ExpertsMMASource}} {
		t.Run(kernel.name, func(t *testing.T) {
			cxx, dir := emulation(t, fmt.Sprintf(emulationHarness, kernel.source), "emu_experts.cpp")
			for _, c := range expertsEmulationCases {
				name := fmt.Sprintf("E%d_N%d_K%d_shift%v_z%d", c.experts, c.n, c.k, c.shift, c.z)
				t.Run(name, func(t *testing.T) {
					var args []string
					total := 0
					for _, r := range c.rows {
						args = append(args, strconv.Itoa(r))
						total += r
					}
					out := runEmulation(t, cxx, dir, "emu_experts.cpp", name,
						[]string{fmt.Sprintf("-DE_=%d", c.experts), fmt.Sprintf("-DN_=%d", c.n), fmt.Sprintf("-DK_=%d", c.k)}, args,
						[]string{fmt.Sprintf("EMU_SHIFT=%d", map[bool]int{false: 0, true: 1}[c.shift]), fmt.Sprintf("EMU_Z=%d", c.z)})
					m := regexp.MustCompile(`rows (\d+) bad (\d+)`).FindStringSubmatch(out)
					if m == nil || m[1] != strconv.Itoa(total) || m[2] != "0" {
						t.Fatalf("emulation reported %q, want rows %d bad 0", strings.TrimSpace(out), total)
					}
				})
			}
		})
	}
}

// dequantizeHarness wraps DequantizeHeader and DequantizeSource in C++ function templates
// for the emulation; emu_dequantize.cpp launches the threads one by one (the kernel has
// no barriers).
const dequantizeHarness = `#include "emu_prelude.h"
%s
template <typename T, int BITS, int GS>
void body(const uint32_t* w, const Shape w_shape, const int w_ndim, const T* scales, const T* biases, T* out) {
%s
}
`

// TestDequantizeKernelEmulated runs DequantizeSource on the CPU emulation for both
// output types, 4 and 8 bits, groups of 32, 64 and 128, 2-D and 3-D weights whose thread
// count is not a multiple of the block, and a weight off the 16-byte boundary, against
// the go engine's arithmetic (testdata/emu_dequantize.cpp): every value bit for bit. The
// GPU test is mlxeng's TestDequantizeKernelMatchesGoEngine.
func TestDequantizeKernelEmulated(t *testing.T) {
	cxx, dir := emulation(t, fmt.Sprintf(dequantizeHarness, DequantizeHeader, DequantizeSource), "emu_dequantize.cpp")
	cases := []struct {
		typ         string // T: __nv_bfloat16 or float
		bits, group int
		shape       []int // of the packed weight, in words
		shift       bool
	}{
		{"__nv_bfloat16", 4, 64, []int{3, 32}, false},
		{"__nv_bfloat16", 4, 32, []int{300, 4}, false}, // 300 threads: two blocks, the second partial
		{"__nv_bfloat16", 8, 128, []int{5, 96}, false},
		{"__nv_bfloat16", 4, 64, []int{3, 32}, true},
		{"float", 4, 128, []int{4, 16}, false},
		{"float", 8, 32, []int{2, 3, 16}, false},
		{"float", 8, 64, []int{2, 3, 16}, true},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s_bits%d_group%d_%v_shift%v", strings.TrimPrefix(c.typ, "__nv_"), c.bits, c.group, c.shape, c.shift)
		t.Run(name, func(t *testing.T) {
			var args []string
			values := 32 / c.bits
			for _, d := range c.shape {
				args = append(args, strconv.Itoa(d))
				values *= d
			}
			out := runEmulation(t, cxx, dir, "emu_dequantize.cpp", strings.NewReplacer("[", "", "]", "", " ", "x").Replace(name),
				[]string{"-DT_=" + c.typ, fmt.Sprintf("-DBITS_=%d", c.bits), fmt.Sprintf("-DGS_=%d", c.group)}, args,
				[]string{fmt.Sprintf("EMU_SHIFT=%d", map[bool]int{false: 0, true: 1}[c.shift])})
			m := regexp.MustCompile(`values (\d+) bad (\d+)`).FindStringSubmatch(out)
			if m == nil || m[1] != strconv.Itoa(values) || m[2] != "0" {
				t.Fatalf("emulation reported %q, want values %d bad 0", strings.TrimSpace(out), values)
			}
		})
	}
}

// rowsHarness wraps RowsHeader and the two row kernels in C++ function templates for the
// emulation (testdata/emu_rows.cpp launches them).
const rowsHarness = `#include "emu_prelude.h"
%s
template <typename S, typename I, typename O>
void gather_body(const S* src, const Shape src_shape, const I* idx, O* out) {
%s
}
template <int R, typename G, typename I, typename O>
void scatter_body(const G* g, const Shape g_shape, const I* idx, O* out) {
%s
}
`

// TestRowKernelsEmulated runs GatherRowsSource and ScatterRowsSource on the CPU emulation
// for bfloat16 and float32 rows longer than a block, with negative and out-of-range
// indices and rows picked twice, against testdata/emu_rows.cpp's references bit for bit.
// The GPU test is mlxeng's TestTakeRowsMatchesMLX.
func TestRowKernelsEmulated(t *testing.T) {
	cxx, dir := emulation(t, fmt.Sprintf(rowsHarness, RowsHeader, GatherRowsSource, ScatterRowsSource), "emu_rows.cpp")
	for _, typ := range []string{"__nv_bfloat16", "float"} {
		name := strings.TrimPrefix(typ, "__nv_")
		t.Run(name, func(t *testing.T) {
			out := runEmulation(t, cxx, dir, "emu_rows.cpp", name, []string{"-DT_=" + typ}, nil, nil)
			m := regexp.MustCompile(`checks (\d+) bad (\d+)`).FindStringSubmatch(out)
			if m == nil || m[1] == "0" || m[2] != "0" {
				t.Fatalf("emulation reported %q, want bad 0", strings.TrimSpace(out))
			}
		})
	}
}

// blockLauncher is the C++ launch(blocks, threads, body) the harnesses of kernels with
// barriers share: one block at a time, its threads as std::threads that drop from the
// block's barrier when they return, as a finished warp leaves the GPU's.
const blockLauncher = `template <typename F>
void launch(int blocks, int threads, F body) {
  for (int bx = 0; bx < blocks; bx++) {
    std::barrier<> bar(threads);
    emu_bar = &bar;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
      ts.emplace_back([&, t] {
        threadIdx = {t, 0, 0};
        blockIdx = {bx, 0, 0};
        blockDim = {threads, 1, 1};
        gridDim = {blocks, 1, 1};
        body();
        emu_bar->arrive_and_drop();
      });
    for (auto& t : ts) t.join();
  }
}
`

// loraHarness wraps LoRAHeader and the three LoRA kernels in C++ function templates for
// the emulation, with blockLauncher to run one of them (testdata/emu_lora.cpp calls it).
const loraHarness = `#include "emu_prelude.h"
%s
template <int R, int ROWS, int W, int ALPHA, bool NEG, typename T>
void forward_body(const T* base, const T* x, const Shape x_shape, const float* a, const float* b, const Shape b_shape, T* out) {
%s
}
template <int R, int ROWS, int W, int ALPHA, bool NEG, typename T>
void rows_body(const T* x, const Shape x_shape, const T* g, const float* a, const float* b, const Shape b_shape, T* dx, float* ut) {
%s
}
template <int R, int W, int ALPHA, bool NEG, typename T>
void columns_body(const T* x, const Shape x_shape, const T* g, const Shape g_shape, const float* ut, float* da, float* db) {
%s
}
` + blockLauncher

// TestLoRAKernelsEmulated runs LoRAForwardSource, LoRARowsBackwardSource and
// LoRAColumnsBackwardSource on the CPU emulation for bfloat16 and float32 activations,
// ranks 1 to 32, widths (multiples of 8) below a warp's lanes and past a block's threads,
// row counts that leave a block's last rows empty, and arrays off the 16-byte boundary
// (built with the alignment sanitizer, so a 16-byte access there fails the test as it
// would fault on the GPU), against float64 references (testdata/emu_lora.cpp): each value
// within float32 rounding of sums of its terms' magnitudes, plus the roundings to the
// activations' type the composition makes. The GPU test is mlxeng's
// TestLoRAAddMatchesComposition.
func TestLoRAKernelsEmulated(t *testing.T) {
	cxx, dir := emulation(t, fmt.Sprintf(loraHarness, LoRAHeader, LoRAForwardSource, LoRARowsBackwardSource, LoRAColumnsBackwardSource), "emu_lora.cpp")
	cases := []struct {
		r, k, m, n int
		alpha      string
		shift      int // the arrays this many elements off the 16-byte boundary
	}{
		{8, 96, 72, 7, "2.0f", 0},
		{8, 96, 72, 7, "2.0f", 1},
		{8, 2056, 2112, 37, "0.5f", 0}, // K and M past a block's 8·256 columns, N past its 16 column warps
		{1, 40, 32, 1, "0.37f", 0},
		{13, 72, 104, 9, "-1.5f", 0},
		{32, 64, 64, 5, "16.0f", 2},
		{16, 24, 16, 12, "0.125f", 0},
	}
	for _, typ := range []string{"__nv_bfloat16", "float"} {
		for _, c := range cases {
			name := fmt.Sprintf("%s/r%d_k%d_m%d_n%d_shift%d", strings.TrimPrefix(typ, "__nv_"), c.r, c.k, c.m, c.n, c.shift)
			t.Run(name, func(t *testing.T) {
				flags := []string{"-DT_=" + typ, "-DR_=" + strconv.Itoa(c.r), "-DK_=" + strconv.Itoa(c.k), "-DM_=" + strconv.Itoa(c.m),
					"-DN_=" + strconv.Itoa(c.n), "-DALPHA_=" + c.alpha, "-DSHIFT_=" + strconv.Itoa(c.shift),
					"-fsanitize=alignment", "-fno-sanitize-recover=alignment"}
				out := runEmulation(t, cxx, dir, "emu_lora.cpp", strings.ReplaceAll(name, "/", "_"), flags, nil, nil)
				m := regexp.MustCompile(`checks (\d+) bad (\d+)`).FindStringSubmatch(out)
				want := c.n*c.m + c.n*2*c.r + c.n*c.k + c.k*c.r + c.r*c.m
				if m == nil || m[1] != strconv.Itoa(want) || m[2] != "0" {
					t.Fatalf("emulation reported %q, want checks %d bad 0", strings.TrimSpace(out), want)
				}
			})
		}
	}
}

// rmsNormHarness wraps LoRAHeader and RMSNormBackwardSource in a C++ function template,
// with blockLauncher to run it (testdata/emu_rmsnorm.cpp calls it).
const rmsNormHarness = `#include "emu_prelude.h"
%s
template <typename T, int EPS>
void body(const T* x, const Shape x_shape, const int x_ndim, const T* w, const T* g, T* dx) {
%s
}
` + blockLauncher

// TestRMSNormBackwardEmulated runs RMSNormBackwardSource on the CPU emulation for
// bfloat16 and float32, rows a warp takes (D below 1024: one, a lane's 8 values, widths
// past a warp's 256, row counts that leave a block's last warps idle) and rows a block
// takes (D from 1024, the real geometry's 2816), and arrays off the 16-byte boundary
// under the alignment sanitizer, against float64 (testdata/emu_rmsnorm.cpp).
func TestRMSNormBackwardEmulated(t *testing.T) {
	cxx, dir := emulation(t, fmt.Sprintf(rmsNormHarness, LoRAHeader, RMSNormBackwardSource), "emu_rmsnorm.cpp")
	cases := []struct{ rows, d, shift int }{
		{1, 8, 0}, {6, 256, 0}, {5, 264, 1}, {9, 512, 0}, {3, 1024, 0}, {2, 2816, 3}, {4, 1032, 0},
	}
	for _, typ := range []string{"__nv_bfloat16", "float"} {
		for _, c := range cases {
			name := fmt.Sprintf("%s_rows%d_d%d_shift%d", strings.TrimPrefix(typ, "__nv_"), c.rows, c.d, c.shift)
			t.Run(name, func(t *testing.T) {
				flags := []string{"-DT_=" + typ, "-DROWS_=" + strconv.Itoa(c.rows), "-DD_=" + strconv.Itoa(c.d),
					"-DSHIFT_=" + strconv.Itoa(c.shift), "-DEPS_=" + strconv.Itoa(int(math.Float32bits(1e-6))),
					"-fsanitize=alignment", "-fno-sanitize-recover=alignment"}
				out := runEmulation(t, cxx, dir, "emu_rmsnorm.cpp", name, flags, nil, nil)
				m := regexp.MustCompile(`checks (\d+) bad (\d+)`).FindStringSubmatch(out)
				if want := c.rows * c.d; m == nil || m[1] != strconv.Itoa(want) || m[2] != "0" {
					t.Fatalf("emulation reported %q, want checks %d bad 0", strings.TrimSpace(out), want)
				}
			})
		}
	}
}

// gegluHarness wraps LoRAHeader, GeGLUHeader and the three GeGLU kernels in C++
// function templates, with blockLauncher to run them (testdata/emu_geglu.cpp calls it).
const gegluHarness = `#include "emu_prelude.h"
%s
%s
template <typename T, bool SPLIT>
void fwd_body(const T* a, const Shape a_shape, const int a_ndim, const T* b, T* out) {
%s
}
template <typename T>
void bwd_split_body(const T* x, const Shape x_shape, const int x_ndim, const T* g, T* dx) {
%s
}
template <typename T>
void bwd_body(const T* gate, const Shape gate_shape, const int gate_ndim, const T* up, const T* g, T* dgate, T* dup) {
%s
}
` + blockLauncher

// TestGeGLUKernelsEmulated runs the GeGLU kernels on the CPU emulation: the forward, split
// and not, bit for bit against MLX's composition rounded op by op; both backwards against
// the float64 derivative (testdata/emu_geglu.cpp). Shapes: one row of one vector, rows
// that leave a block's last threads idle, the real geometry's experts width (1408) and
// arrays off the 16-byte boundary under the alignment sanitizer. The GPU test is
// mlxeng's TestGeGLUKernelMatchesComposition.
func TestGeGLUKernelsEmulated(t *testing.T) {
	cxx, dir := emulation(t, fmt.Sprintf(gegluHarness, LoRAHeader, GeGLUHeader, GeGLUForwardSource,
		GeGLUBackwardSplitSource, GeGLUBackwardSource), "emu_geglu.cpp")
	for _, c := range []struct{ rows, i, shift int }{{1, 8, 0}, {3, 264, 0}, {5, 1408, 0}, {2, 72, 3}} {
		name := fmt.Sprintf("rows%d_i%d_shift%d", c.rows, c.i, c.shift)
		t.Run(name, func(t *testing.T) {
			flags := []string{"-DROWS_=" + strconv.Itoa(c.rows), "-DI_=" + strconv.Itoa(c.i), "-DSHIFT_=" + strconv.Itoa(c.shift),
				"-fsanitize=alignment", "-fno-sanitize-recover=alignment"}
			out := runEmulation(t, cxx, dir, "emu_geglu.cpp", name, flags, nil, nil)
			m := regexp.MustCompile(`checks (\d+) bad (\d+)`).FindStringSubmatch(out)
			if want := 6 * c.rows * c.i; m == nil || m[1] != strconv.Itoa(want) || m[2] != "0" {
				t.Fatalf("emulation reported %q, want checks %d bad 0", strings.TrimSpace(out), want)
			}
		})
	}
}

// expertOrderHarness wraps ExpertOrderSource in a C++ function template, with
// blockLauncher to run it (testdata/emu_expert_order.cpp calls it).
const expertOrderHarness = `#include "emu_prelude.h"
template <int E>
void body(const int32_t* idx, const Shape idx_shape, int32_t* order, int32_t* inverse) {
%s
}
` + blockLauncher

// TestExpertOrderEmulated runs ExpertOrderSource on the CPU emulation against a stable
// sort (testdata/emu_expert_order.cpp): one id; fewer ids than a warp; the real 26B-A4B
// geometry's 3,072 pairs of 128 experts (three rounds of 1024); a count that is not a
// multiple of 1024 with 1024 experts (the largest E, every warp's counts in one byte
// each); every id the same; and ids outside [0, E), which the kernel clamps.
func TestExpertOrderEmulated(t *testing.T) {
	cxx, dir := emulation(t, fmt.Sprintf(expertOrderHarness, ExpertOrderSource), "emu_expert_order.cpp")
	for _, c := range []struct{ n, e, out int }{{1, 4, 0}, {7, 4, 0}, {3072, 128, 0}, {2500, 1024, 0}, {2048, 1, 0}, {300, 8, 1}} {
		name := fmt.Sprintf("n%d_e%d_out%d", c.n, c.e, c.out)
		t.Run(name, func(t *testing.T) {
			flags := []string{"-DN_=" + strconv.Itoa(c.n), "-DE_=" + strconv.Itoa(c.e), "-DOUT_=" + strconv.Itoa(c.out)}
			out := runEmulation(t, cxx, dir, "emu_expert_order.cpp", name, flags, nil, nil)
			m := regexp.MustCompile(`checks (\d+) bad (\d+)`).FindStringSubmatch(out)
			if want := 2 * c.n; m == nil || m[1] != strconv.Itoa(want) || m[2] != "0" {
				t.Fatalf("emulation reported %q, want checks %d bad 0", strings.TrimSpace(out), want)
			}
		})
	}
}

// normRoPEHarness wraps LoRAHeader, NormRoPEHeader and both NormRoPE kernels in C++
// function templates, with blockLauncher to run them (testdata/emu_norm_rope.cpp).
const normRoPEHarness = `#include "emu_prelude.h"
%s
%s
template <typename T, int EPS, int OFFSET, int SCALE>
void fwd_body(const T* x, const Shape x_shape, const T* w, const float* freqs, T* out) {
%s
}
template <typename T, int EPS, int OFFSET, int SCALE>
void bwd_body(const T* x, const Shape x_shape, const T* w, const float* freqs, const T* g, T* dx) {
%s
}
` + blockLauncher

// TestNormRoPEEmulated runs the NormRoPE kernels on the CPU emulation for bfloat16 and
// float32, the real geometry's head sizes (256 and 512: a lane's 4 and 8 values of each
// half), a head size of 64 (one value), rows that leave a block's last warps idle, and a
// first position past 0, against float64 (testdata/emu_norm_rope.cpp).
func TestNormRoPEEmulated(t *testing.T) {
	cxx, dir := emulation(t, fmt.Sprintf(normRoPEHarness, LoRAHeader, NormRoPEHeader, NormRoPEForwardSource, NormRoPEBackwardSource),
		"emu_norm_rope.cpp")
	for _, typ := range []string{"__nv_bfloat16", "float"} {
		for _, c := range []struct{ l, h, d, offset int }{{3, 2, 256, 0}, {5, 1, 512, 128}, {2, 3, 64, 7}} {
			name := fmt.Sprintf("%s_l%d_h%d_d%d_off%d", strings.TrimPrefix(typ, "__nv_"), c.l, c.h, c.d, c.offset)
			t.Run(name, func(t *testing.T) {
				flags := []string{"-DT_=" + typ, "-DL_=" + strconv.Itoa(c.l), "-DH_=" + strconv.Itoa(c.h), "-DD_=" + strconv.Itoa(c.d),
					"-DOFFSET_=" + strconv.Itoa(c.offset), "-DEPS_=" + strconv.Itoa(int(math.Float32bits(1e-6))),
					"-DSCALE_=" + strconv.Itoa(int(math.Float32bits(1)))}
				out := runEmulation(t, cxx, dir, "emu_norm_rope.cpp", name, flags, nil, nil)
				m := regexp.MustCompile(`checks (\d+) bad (\d+)`).FindStringSubmatch(out)
				if want := 2 * c.l * c.h * c.d; m == nil || m[1] != strconv.Itoa(want) || m[2] != "0" {
					t.Fatalf("emulation reported %q, want checks %d bad 0", strings.TrimSpace(out), want)
				}
			})
		}
	}
}
