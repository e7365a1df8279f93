// Package mlxeng is dgtune's MLX engine: the mx.Engine contract implemented over
// mlx-c, MLX's C API, through cgo. It is compiled only with the build tag mlx; without
// the tag this package is empty, nothing cgo is built, and mx.Open("mlx") explains how
// to enable it.
//
// # Building
//
// The headers and libraries come from the user's MLX install, never from this
// repository. Point cgo at them:
//
//	CGO_CFLAGS=-I/opt/mlx/include \
//	CGO_LDFLAGS="-L/opt/mlx/lib -lmlxc -lmlx" \
//	go test -tags mlx ./...
//
// With shared libraries outside the loader's search path, also set
// LD_LIBRARY_PATH=/opt/mlx/lib (Linux) or DYLD_LIBRARY_PATH (macOS) when running, or
// link with -Wl,-rpath,/opt/mlx/lib: a binary's RUNPATH does not reach libmlxc's own
// dependency on libmlx. On Apple silicon, Homebrew's mlx-c gives
// CGO_CFLAGS=-I$(brew --prefix)/include and
// CGO_LDFLAGS="-L$(brew --prefix)/lib -lmlxc -lmlx".
//
// MLX v0.31.2 to v0.32.x are supported (Version reports the one linked). The go engine,
// the oracle of the parity tests, follows that release where MLX changed an algorithm
// (goeng.NewFollowing).
//
// # Semantics
//
// Every mx op maps to the MLX op of the same name (fast.rms_norm, fast.rope,
// fast.scaled_dot_product_attention, quantize, quantized_matmul, gather_qmm, the
// threefry random functions with explicit keys, value_and_grad, stop_gradient).
// Where MLX's result dtype differs from the contract the go engine defines (indices
// are int32 here, uint32 in MLX; integer sums keep their dtype; bool arithmetic is
// int32), the engine casts so that both engines agree. Integer division and
// remainder by zero give 0, as on the go engine, instead of trapping.
//
// Evaluation is lazy: ops build MLX's graph and Eval, ToSlice (and so Float32s, Item)
// compute it. Arrays run on the GPU when MLX has one (Metal or CUDA), else on the CPU.
//
// # Threads
//
// Go moves goroutines between OS threads, while MLX (since 0.32) ties a stream's
// command encoder, its tracing state and its compile cache to a thread. The engine
// therefore owns two OS threads. Home makes the stream; every evaluation and every
// value_and_grad outside a compiled function runs there (the traced function too, so
// evaluations inside it see the trace). The tracer compiles, traces and replays
// compiled functions, so that the host builds the next training step while home
// launches this one (AsyncEval returns once home has taken the work). All other
// threads only build graphs, with the engine's stream as their default; ops themselves
// are plain cgo calls from the caller's goroutine. MLXENG_TRACER=home runs compiled
// functions at home and waits for AsyncEval's launch, as before.
//
// # Memory
//
// Each mx.Array on this engine owns one mlx_array reference, released exactly once:
// by Array.Free, by the end of the mx.Tidy scope that created it, or, as a safety net
// only, after Go's garbage collector finds it unreachable (the reference is then freed
// by the engine's next op). The arrays a ValueAndGrad function creates, its traced
// arguments included, are freed when the function returns to MLX; keep nothing made
// inside it. Using a freed array panics, except for its shape and dtype, which stay
// readable.
//
// # Checkpoints
//
// The engine is an mx.FileLoader: it reads safetensors files with mlx_load_safetensors,
// straight into MLX's buffers, instead of having the checkpoint copied in from Go's
// memory map. MLXENG_LOAD=go restores the copy (for comparing the two).
//
// # Distributed
//
// JoinGroup is mlx_distributed_init (ring, nccl, mpi or any) and AllSum is
// mlx_distributed_all_sum, run on the CPU stream as MLX's ring and MPI backends
// require, and on the engine's GPU stream for NCCL (no copy to the host). Joining ignores SIGPIPE for the process: the ring writes to its sockets
// without MSG_NOSIGNAL, and a dead peer must be MLX's error ("connection to a peer was
// lost"), not this process's death. MLX's ring has no timeouts: a peer that stops
// answering leaves all_sum waiting (and a core busy polling), so callers watch their
// peers themselves.
//
// # Errors
//
// MLX reports failures through its error handler, which this engine installs once:
// a failing op panics with an *Error ("mlx: <op>: <MLX's message>"), following mx's
// contract that ops panic on misuse; MLX never aborts the process.
//
// MLX's error handler and default device are process-wide, so there is one engine
// per process: every Open("mlx") returns it. It is meant to be driven by one
// goroutine at a time, like MLX itself.
package mlxeng
