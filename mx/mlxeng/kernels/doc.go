// Package kernels holds the CUDA C sources of the mlx engine's custom kernels (MLX's
// fast.cuda_kernel: MLX writes each kernel's signature and template constants around
// the body and compiles it with NVRTC on first use): the fused experts product
// (ExpertsMMASource on mma.sync, and the first one, ExpertsSource, on WMMA),
// dequantize (DequantizeSource), the take of rows with its scatter-add
// (GatherRowsSource, ScatterRowsSource), a LoRA adapter's term with its gradients
// (LoRAForwardSource, LoRARowsBackwardSource, LoRAColumnsBackwardSource), rms_norm's
// input gradient without the weight's (RMSNormBackwardSource), the GeGLU activation
// and its gradient (GeGLUForwardSource, GeGLUBackwardSplitSource, GeGLUBackwardSource),
// the experts' order and its inverse (ExpertOrderSource), the queries' and keys' norm and
// rotation (NormRoPEForwardSource, NormRoPEBackwardSource) and a multi-tensor AdamW update
// (AdamSource, written for a number of tensors). The sources
// are plain strings so that CI, which has neither MLX nor a GPU, can still run them: the
// package's tests compile each body as C++ against a CPU emulation of the CUDA subset it
// uses (testdata/emu_prelude.h: a block's threads as std::threads, __syncthreads a
// barrier, a warp's shuffle through the block's barrier, WMMA fragments computed whole,
// mma.sync from the warp's registers by the fragment layout PTX documents, atomic adds
// as plain ones with threads run one at a time) and compare the results with float64
// products (the experts and LoRA, within float32 rounding; GeGLU's, rms_norm's and
// NormRoPE's within their roundings) or, bit for bit, with the arithmetic they must
// reproduce (the others, GeGLU's forward and the experts' order included; AdamW with the
// go engine's composition, from an external test package that may import the engines).
package kernels
