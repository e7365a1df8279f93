// Package mx is the array layer every other dgtune package is written against.
//
// It is shaped after MLX: immutable n-dimensional arrays, ops named as in MLX
// (Add, Matmul, TakeAlongAxis, RMSNorm, ScaledDotProductAttention, QuantizedMatmul,
// GatherQMM, ...), explicit random keys, ValueAndGrad and StopGradient for reverse-mode
// autodiff, and Eval for engines that evaluate lazily.
//
// An Array belongs to an Engine. Two engines implement the same contract:
//
//   - "go"  (package mx/goeng): pure Go, always compiled, eager, the CI engine and an
//     independent numerical oracle;
//   - "mlx" (package mx/mlxeng, build tag mlx): cgo over mlx-c.
//
// Code outside mx never imports an engine package directly except through mx/engines,
// which registers every engine compiled into the binary. Pick one at run time with
// Open("go"), Open("mlx") or Open("auto").
//
// Memory: MLX arrays live in C memory that Go's garbage collector does not see. Callers
// release a step's temporaries deterministically with Tidy (everything created inside
// the function and not returned is freed) or Array.Free. On the go engine both are
// cheap no-ops beyond dropping references; the garbage collector does the rest.
//
// Distributed: an engine may also implement Distributed (the mlx engine does, over
// MLX's ring, NCCL and MPI backends): JoinGroup joins the group of processes the environment
// describes, and Group.AllSum sums arrays across it, returning an error when a peer is
// lost. The go engine runs alone.
//
// Errors: ops panic on programmer errors (shape or dtype mismatch), naming the op and
// the shapes involved. Anything that reads files returns an error.
package mx
