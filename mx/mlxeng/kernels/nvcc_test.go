package kernels

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nvccPrelude stands in for what MLX-CUDA puts before a custom kernel
// (mlx/backend/cuda/device/utils.cuh and cooperative groups): the CUDA types the
// kernels use and MLX's Shape, a fixed array of ints.
const nvccPrelude = `#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
namespace mlx::core::cu {
struct Shape { int32_t v[10]; __device__ int32_t operator[](int i) const { return v[i]; } };
}
`

// nvccArg is one of a kernel's arrays: its name, CUDA element type, and whether MLX
// declares its _shape and _ndim (it does when the source names them).
type nvccArg struct{ name, ctype string }

// nvccKernel is a kernel as mlxeng makes it (newCUDAKernel) and configures it for one
// launch: the header, the body, the inputs and outputs, and the template constants in
// MLX's form ("constexpr int NJ = 1408;", "using T = __nv_bfloat16;").
type nvccKernel struct {
	name, header, source string
	inputs, outputs      []nvccArg
	consts               []string
}

// cudaSource writes k as MLX's build_kernel (mlx/backend/cuda/custom_kernel.cpp) does.
func (k nvccKernel) cudaSource() string {
	var b strings.Builder
	b.WriteString(nvccPrelude)
	b.WriteString(k.header)
	b.WriteString("\nnamespace mlx::core::cu {\nnamespace cg = cooperative_groups;\n__global__ void " + k.name + "(\n")
	for _, in := range k.inputs {
		fmt.Fprintf(&b, "    const %s* %s,\n", in.ctype, in.name)
		if strings.Contains(k.source, in.name+"_shape") {
			fmt.Fprintf(&b, "    const __grid_constant__ Shape %s_shape,\n", in.name)
		}
		if strings.Contains(k.source, in.name+"_ndim") {
			fmt.Fprintf(&b, "    const __grid_constant__ int %s_ndim,\n", in.name)
		}
	}
	for i, out := range k.outputs {
		sep := ",\n"
		if i == len(k.outputs)-1 {
			sep = ") {\n"
		}
		fmt.Fprintf(&b, "    %s* %s%s", out.ctype, out.name, sep)
	}
	for _, c := range k.consts {
		b.WriteString("  " + c + "\n")
	}
	b.WriteString(k.source)
	b.WriteString("\n}\n} // namespace mlx::core::cu\n")
	return b.String()
}

// TestKernelsCompileWithNVCC compiles the engine's kernels (AdamSource aside), wrapped as
// MLX-CUDA wraps a custom kernel, with nvcc for sm_90 — a check of the
// CUDA dialect (types, intrinsics, overloads) that the C++ emulation cannot make, so that
// a lease is not spent on a kernel NVRTC refuses. NVRTC is not nvcc and MLX's own header
// is not this prelude, so passing here does not prove the GPU compiles them. Skips
// without nvcc (CI has none); DGTUNE_NVCC names another compiler.
func TestKernelsCompileWithNVCC(t *testing.T) {
	nvcc := os.Getenv("DGTUNE_NVCC")
	if nvcc == "" {
		var err error
		if nvcc, err = exec.LookPath("nvcc"); err != nil {
			t.Skip("no nvcc")
		}
	}
	bf, f32, i32, u32 := "__nv_bfloat16", "float", "int32_t", "uint32_t"
	a := func(name, ctype string) nvccArg { return nvccArg{name, ctype} }
	tBF := "using T = __nv_bfloat16;"
	experts := func(trans bool, nj, nc int) []string {
		return []string{fmt.Sprintf("constexpr bool TRANS = %v;", trans), fmt.Sprintf("constexpr int NJ = %d;", nj), fmt.Sprintf("constexpr int NC = %d;", nc)}
	}
	lora := func(r, rows, w int, neg bool) []string {
		c := []string{fmt.Sprintf("constexpr int R = %d;", r)}
		if rows > 0 {
			c = append(c, fmt.Sprintf("constexpr int ROWS = %d;", rows))
		}
		return append(c, fmt.Sprintf("constexpr int W = %d;", w), "constexpr int ALPHA = 1090519040;", fmt.Sprintf("constexpr bool NEG = %v;", neg))
	}
	expertsIO := []nvccArg{a("x", bf), a("w", u32), a("scales", bf), a("biases", bf), a("idx", u32)}
	for _, k := range []nvccKernel{
		{"dgtune_mma_experts_t", ExpertsMMAHeader, ExpertsMMASource, expertsIO, []nvccArg{a("out", bf)}, experts(true, 1408, 2816)},
		{"dgtune_mma_experts_f", ExpertsMMAHeader, ExpertsMMASource, expertsIO, []nvccArg{a("out", bf)}, experts(false, 2816, 1408)},
		{"dgtune_geglu_split", LoRAHeader + GeGLUHeader, GeGLUForwardSource, []nvccArg{a("a", bf), a("b", bf)}, []nvccArg{a("out", bf)},
			[]string{tBF, "constexpr bool SPLIT = true;"}},
		{"dgtune_geglu_pair", LoRAHeader + GeGLUHeader, GeGLUForwardSource, []nvccArg{a("a", bf), a("b", bf)}, []nvccArg{a("out", bf)},
			[]string{tBF, "constexpr bool SPLIT = false;"}},
		{"dgtune_geglu_split_vjp", LoRAHeader + GeGLUHeader, GeGLUBackwardSplitSource, []nvccArg{a("x", bf), a("g", bf)},
			[]nvccArg{a("dx", bf)}, []string{tBF}},
		{"dgtune_geglu_vjp", LoRAHeader + GeGLUHeader, GeGLUBackwardSource, []nvccArg{a("gate", bf), a("up", bf), a("g", bf)},
			[]nvccArg{a("dgate", bf), a("dup", bf)}, []string{tBF}},
		{"dgtune_expert_order", "", ExpertOrderSource, []nvccArg{a("idx", i32)}, []nvccArg{a("order", i32), a("inverse", i32)},
			[]string{"constexpr int E = 128;"}},
		{"dgtune_norm_rope", LoRAHeader + NormRoPEHeader, NormRoPEForwardSource, []nvccArg{a("x", bf), a("w", bf), a("freqs", f32)},
			[]nvccArg{a("out", bf)}, []string{tBF, "constexpr int EPS = 897988541;", "constexpr int OFFSET = 128;", "constexpr int SCALE = 1065353216;"}},
		{"dgtune_norm_rope_vjp", LoRAHeader + NormRoPEHeader, NormRoPEBackwardSource, []nvccArg{a("x", bf), a("w", bf), a("freqs", f32), a("g", bf)},
			[]nvccArg{a("dx", bf)}, []string{tBF, "constexpr int EPS = 897988541;", "constexpr int OFFSET = 0;", "constexpr int SCALE = 1065353216;"}},
		// The kernels that have run on the H200 already, so that a later change to them is
		// checked here too.
		{"dgtune_experts_t", ExpertsHeader, ExpertsSource, expertsIO, []nvccArg{a("out", bf)}, experts(true, 1408, 2816)},
		{"dgtune_experts_f", ExpertsHeader, ExpertsSource, expertsIO, []nvccArg{a("out", bf)}, experts(false, 2816, 1408)},
		{"dgtune_dequantize", DequantizeHeader, DequantizeSource, []nvccArg{a("w", u32), a("scales", bf), a("biases", bf)},
			[]nvccArg{a("out", bf)}, []string{tBF, "constexpr int BITS = 4;", "constexpr int GS = 64;"}},
		{"dgtune_gather_rows", RowsHeader, GatherRowsSource, []nvccArg{a("src", bf), a("idx", i32)}, []nvccArg{a("out", bf)}, nil},
		{"dgtune_scatter_rows", RowsHeader, ScatterRowsSource, []nvccArg{a("g", bf), a("idx", i32)}, []nvccArg{a("out", bf)},
			[]string{"constexpr int R = 3072;"}},
		{"dgtune_lora_forward", LoRAHeader, LoRAForwardSource, []nvccArg{a("base", bf), a("x", bf), a("a", f32), a("b", f32)},
			[]nvccArg{a("out", bf)}, lora(8, 4, 8, true)},
		{"dgtune_lora_rows", LoRAHeader, LoRARowsBackwardSource, []nvccArg{a("x", bf), a("g", bf), a("a", f32), a("b", f32)},
			[]nvccArg{a("dx", bf), a("ut", f32)}, lora(8, 4, 8, true)},
		{"dgtune_lora_columns", LoRAHeader, LoRAColumnsBackwardSource, []nvccArg{a("x", bf), a("g", bf), a("ut", f32)},
			[]nvccArg{a("da", f32), a("db", f32)}, lora(8, 0, 16, true)},
		{"dgtune_rms_norm_dx", LoRAHeader, RMSNormBackwardSource, []nvccArg{a("x", bf), a("w", bf), a("g", bf)},
			[]nvccArg{a("dx", bf)}, []string{tBF, "constexpr int EPS = 897988541;"}},
	} {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			src := filepath.Join(dir, k.name+".cu")
			if err := os.WriteFile(src, []byte(k.cudaSource()), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(nvcc, "-std=c++17", "-arch=sm_90", "--ptx", "-Werror", "all-warnings", "-o", filepath.Join(dir, k.name+".ptx"), src)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("nvcc: %v\n%s", err, out)
			}
		})
	}
}
