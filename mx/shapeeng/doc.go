// Package shapeeng is an mx engine that computes nothing: it follows an mx program through
// shapes and dtypes alone and records, for every array, its size and how long the go engine
// (package goeng) would hold it. The recorded peak of live bytes is what the program needs on
// the go engine, without a byte of its data allocated: the memory estimate of a training step
// (package estimate) runs the real step — model, objective, LoRA gradients, optimizer — on it.
//
// Lifetimes follow the go engine's, where Go's collector frees an array once nothing refers
// to it:
//
//   - The program's own references end at an array's last use as an op's input (Go's
//     liveness analysis ends a local at its last use). Arrays a caller keeps in long-lived
//     places — a model's weights, adapter parameters, optimizer state — are kept to the end
//     with Keep.
//   - An op whose input descends from a ValueAndGrad argument records a graph node (as
//     goeng's record does) that refers to every input and to whatever its VJP keeps (the
//     attention's log-sum-exps, a LoRA linear's x·A); the backward walk holds every node it
//     reaches until it ends. So, as on the go engine, a traced array lives until the
//     backward pass that reads it is over (Retention RetainGraph). RetainNeeded instead
//     frees each array after the last op or VJP that reads it: a leaner engine's floor.
//   - The backward pass is simulated op by op in goeng's order: each VJP makes the
//     cotangents goeng's makes (fresh float32 arrays, or views of the incoming one), and a
//     cotangent is dropped once its tensor's VJP has run.
//   - Views are views: a reshape, a pending transpose of the last two axes, a cast to the
//     same dtype and StopGradient share their source's elements, as in goeng.
//   - Memory the ops do not show is counted from goeng's own plans, not copies of its
//     constants: the attention's kept probabilities and score blocks
//     (goeng.AttentionMemoryOf), the products' packing pools per worker (sgemm.Scratch,
//     scratch.go), and the kernels' temporaries (float32 views of half operands, int64
//     copies of indices).
//
// Values are never computed: ToSlice returns zeros, so index arrays read back (router
// top-k, sorted expert ids) are zeros too, and host-side constructors skip computing
// theirs (mx.ValueFree: the encoder's attention mask). That changes no shape on the paths the model
// takes: every op's output shape depends on its inputs' shapes alone, and the go engine's
// expert products (gather_mm, gather_qmm with sorted indices) use the rows in place with
// per-worker buffers whose size does not depend on how rows fall to experts.
//
// The engine is not registered with mx: a program that wants it constructs it with New.
package shapeeng
