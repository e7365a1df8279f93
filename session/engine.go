package session

import (
	"fmt"
	"os"

	"github.com/dgtune/dgtune/mx"
)

// ComputeDType maps the compute_dtype key to the dtype the base model is loaded in.
func ComputeDType(name string) (mx.DType, error) {
	switch name {
	case "", "float32":
		return mx.Float32, nil
	case "bfloat16":
		return mx.BFloat16, nil
	}
	return 0, fmt.Errorf("compute_dtype %q: want float32 or bfloat16", name)
}

// OpenEngine opens the engine named by backend for a model computed in computeDType,
// with the allocator limit memoryLimitGB (0 keeps the engine's default). bfloat16
// compute needs an engine that computes in it: the go engine stores bfloat16 exactly
// but computes in float32, so it refuses the key instead of silently ignoring it.
func OpenEngine(backend, computeDType string, memoryLimitGB float64) (mx.Engine, error) {
	dt, err := ComputeDType(computeDType)
	if err != nil {
		return nil, err
	}
	PrepareEngine(backend, computeDType)
	e, err := mx.Open(backend)
	if err != nil {
		return nil, err
	}
	if dt != mx.Float32 && e.Name() == "go" {
		return nil, fmt.Errorf("compute_dtype %s needs the mlx engine (the go engine computes in float32); use backend: mlx or compute_dtype: float32", computeDType)
	}
	if memoryLimitGB > 0 {
		ok, err := mx.SetMemoryLimit(e, int64(memoryLimitGB*(1<<30)))
		if err != nil {
			return nil, fmt.Errorf("memory_limit_gb %g: %w", memoryLimitGB, err)
		}
		if !ok {
			return nil, fmt.Errorf("memory_limit_gb %g: the %s engine has no allocator limit (Go's runtime owns its memory; see GOMEMLIMIT)", memoryLimitGB, e.Name())
		}
	}
	return e, nil
}

// tf32Env is MLX's switch for TF32 products, read once per process at the first product.
const tf32Env = "MLX_ENABLE_TF32"

// PrepareEngine makes the process-wide choices the engine reads when it is first opened,
// for a run computed in computeDType on backend. OpenEngine calls it; code that opens the
// engine earlier through mx.Open (train's distributed setup) calls it first.
//
// Today that is MLX-CUDA's TF32 switch, turned on for bfloat16 compute unless the user
// set it. The mlx engine turns it off by default, so that float32 compute means float32
// products (the go engine's and PyTorch's). But MLX v0.31–0.32 also gates the tensor-core
// configuration of its grouped GEMM — gather_mm over experts sorted by index, bfloat16
// included — on that switch: with it off, the bfloat16 experts of the real 26B-A4B
// geometry ran in a SIMT kernel at 2.8 ms a product, 57 % of the step's GPU time
// (bench/results/gpu-profile-real6.txt). With bfloat16 activations the float32 products
// left are the LoRA factors', which TF32 computes with 10-bit mantissas, still finer than
// the bfloat16 the peer (PEFT under bf16) multiplies them in. The process keeps the first
// choice: MLX reads the variable once.
func PrepareEngine(backend, computeDType string) {
	dt, err := ComputeDType(computeDType)
	if err != nil || dt != mx.BFloat16 || backend == "go" {
		return
	}
	if _, set := os.LookupEnv(tf32Env); !set {
		os.Setenv(tf32Env, "1")
	}
}
