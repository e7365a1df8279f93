// Package uninit allocates large float32 slices whose elements the caller is about to
// overwrite, without the zeroing make does.
//
// A training step on the go engine allocates about a gigabyte of fresh activations,
// products and cotangents (bench preset, prompt 128 / canvas 256), each of which a
// parallel kernel then writes in full. make zeroes every one of them first, on the
// goroutine that allocates — outside the kernel's parallel region — so on many cores
// that zeroing is a large part of the step's serial time. Float32s asks the Go
// runtime's allocator (runtime.mallocgc, which the runtime keeps callable from outside
// under its documented signature, go.dev/issue/67401) for a pointer-free block with
// zeroing skipped. The memory is ordinary garbage-collected heap: it is freed and
// counted like any other slice.
//
// The contents are arbitrary: use it only where every element is written before any is
// read. Small slices, and builds tagged purego, use make. Builds tagged uninitnan fill
// every large slice with NaN, so that tests catch an element left unwritten (CI runs the
// go engine's and the model's tests so).
package uninit
