// Package sgemm is the go engine's dense float32 matrix product,
// C (+)= op(A)·op(B) on row-major slices with leading strides, where op
// optionally transposes an operand in place of materialising Aᵀ or Bᵀ.
//
// It follows the GotoBLAS/BLIS structure. C is cut into tiles of at most
// mcMax×ncMax; each tile is one task, taken by one of at most GOMAXPROCS
// goroutines started for the call (tasks are pulled from a shared counter,
// so a slow core takes fewer). A task walks K in blocks of at most kcMax,
// packs its rows of A into mr-row micro-panels and its columns of B into
// nr-column micro-panels (zero-padded at the edges, so the micro-kernel
// never branches on size), and sweeps the mr×nr micro-kernel over the tile.
// A B micro-panel (kc×nr, 16 KiB) stays in L1 while the kernel runs down the
// tile's rows; the packed A block stays in L2. When A has at most smallM rows,
// packing B would cost as much as the product: a row kernel streams B a row
// at a time instead, updating one row of sums in L1. When K is a LoRA rank
// (at most thinMaxK), packing A and calling the micro-kernel per tile would
// cost more than its few steps of k: op(B) is packed once, whole, and a thin
// AVX-512 kernel reads A in place and sweeps eight rows of C per call. GemmPacked lets the
// caller fill the B panels itself, so a quantized weight is decoded once per
// block straight into the layout the kernel reads; GemmThen lets it finish
// each block of C (an elementwise epilogue) on the goroutine that computed it,
// while the block is in cache. Batch runs many products on one pool.
//
// The micro-kernel is 6×16: twelve YMM accumulators, two YMM loads of B and
// six broadcasts of A per step of k, VFMADD231PS throughout. It and the row
// kernel are Go assembly for amd64 CPUs with AVX2 and FMA (chosen at run time
// with golang.org/x/sys/cpu); everything else — other architectures, older
// CPUs, and builds tagged purego — runs portable Go kernels with the same
// blocking (on arm64 the Go compiler fuses their multiply-adds).
//
// Results are deterministic: every element of C is computed by exactly one
// task, as c + Σ_block, block after block in order, where each block's sum
// starts from zero and takes its terms in order of k; the k-blocking depends
// only on K. How C is cut into tasks, how many goroutines run, which one
// takes a task and whether the tile or the row kernel computes an element
// change nothing, so the output is bitwise identical for any GOMAXPROCS and
// for any grouping of the rows of A. K is never split across goroutines.
// The AVX2 and Go kernels round differently (fused versus separate
// multiply-add on amd64), so they agree to float32 rounding, not bitwise.
package sgemm
