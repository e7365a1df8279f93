// Package goeng is dgtune's pure-Go array engine: eager, CPU, parallel over cores, with
// reverse-mode autodiff recorded on a per-call tape. It needs no cgo and is always
// compiled; it registers itself with mx under the name "go".
//
// Float compute is float32; float16 and bfloat16 arrays are converted to float32 for
// each op and the result rounded back to the op's dtype, as MLX's CPU backend does.
// Integer ops compute in int64 and wrap to the result dtype.
//
// Arrays are immutable and always contiguous row-major; views (transpose, broadcast,
// slice) are materialised. Memory is managed by Go's garbage collector, so Free and
// scopes are no-ops beyond dropping references.
//
// Besides mx.Engine it has the optional capabilities mx.AdamStepper, mx.AdamStepperAll, mx.GeGLUSplitter, mx.NormRoPEr,
// mx.TakeWeightedSummer and mx.LoRALinearer, each computing what the op-by-op composition
// would (bit for bit, or where a doc comment says otherwise to float32 rounding) in one op. An Engine keeps
// one piece of state: a small cache of RoPE's cosine and sine tables (read only once made).
package goeng
