//go:build mlx

package mlxeng

/*
#include <stdint.h>
#include <string.h>
#include "mlx/c/mlx.h"

// MLX calls the handler on the thread that made the failing call, before that call
// returns its status, so a thread-local buffer read under runtime.LockOSThread
// belongs to exactly the call that failed.
static __thread char mlxeng_msg[4096];
static __thread int mlxeng_failed;

static void mlxeng_on_error(const char* msg, void* data) {
	(void)data;
	strncpy(mlxeng_msg, msg ? msg : "unknown error", sizeof(mlxeng_msg) - 1);
	mlxeng_msg[sizeof(mlxeng_msg) - 1] = 0;
	mlxeng_failed = 1;
}

static void mlxeng_install_handler(void) { mlx_set_error_handler(mlxeng_on_error, NULL, NULL); }
static const char* mlxeng_message(void) { return mlxeng_failed ? mlxeng_msg : ""; }

// Since MLX 0.32 a stream's command encoder belongs to the thread that made the
// stream, and each thread has its own default stream. The engine makes its one stream
// on its home thread, evaluates only there, and makes the stream every other thread's
// default too, so that ops MLX builds internally without an explicit stream land on
// it as well (building a graph touches no encoder).
static mlx_stream mlxeng_stream;
static __thread int mlxeng_ready;
static __thread int mlxeng_home;

// mlxeng_begin starts one mlx-c call on this thread: clear the last error, and on the
// thread's first call adopt the engine's stream as its default.
static int mlxeng_begin(void) {
	mlxeng_failed = 0;
	mlxeng_msg[0] = 0;
	if (!mlxeng_ready && mlxeng_stream.ctx != NULL) {
		if (mlx_set_default_stream(mlxeng_stream) != 0) {
			return 1;
		}
		mlxeng_ready = 1;
	}
	return 0;
}

int mlxeng_on_home(void) { return mlxeng_home; }

// The tracer thread (threads.go) traces and replays compiled closures; MLX keeps a
// compiled function's traces in a cache of the thread that compiled it.
static __thread int mlxeng_tracer;
void mlxeng_make_tracer(void) { mlxeng_tracer = 1; }
int mlxeng_on_tracer(void) { return mlxeng_tracer; }

// The value_and_grad closure: payload is a runtime/cgo.Handle number, never a Go
// pointer.
extern int mlxengCallback(mlx_vector_array* res, mlx_vector_array input, uintptr_t id);

static int mlxeng_trampoline(mlx_vector_array* res, const mlx_vector_array input, void* payload) {
	return mlxengCallback(res, input, (uintptr_t)payload);
}

static mlx_closure mlxeng_closure(uintptr_t id) {
	return mlx_closure_new_func_payload(mlxeng_trampoline, (void*)id, NULL);
}

// A checkpoint's closure outlives the call that made it (MLX re-runs it in the
// backward pass), so it owns its handle: MLX's destructor releases it with the last
// copy of the closure.
extern void mlxengRelease(uintptr_t id);

static void mlxeng_release(void* payload) { mlxengRelease((uintptr_t)payload); }

static mlx_closure mlxeng_owned_closure(uintptr_t id) {
	return mlx_closure_new_func_payload(mlxeng_trampoline, (void*)id, mlxeng_release);
}

// mlxeng_info copies shape (up to cap axes) and dtype in one call; it returns ndim.
static int mlxeng_info(mlx_array a, int* shape, int cap, int* dtype) {
	size_t nd = mlx_array_ndim(a);
	const int* s = mlx_array_shape(a);
	for (size_t i = 0; i < nd && i < (size_t)cap; i++) {
		shape[i] = s[i];
	}
	*dtype = (int)mlx_array_dtype(a);
	return (int)nd;
}

// mlxeng_read evaluates a, makes it row-contiguous and copies nbytes of it to dst.
static int mlxeng_read(mlx_array a, mlx_stream s, void* dst, size_t nbytes) {
	mlx_array c = mlx_array_new();
	if (mlx_contiguous(&c, a, false, s) != 0 || mlx_array_eval(c) != 0) {
		mlx_array_free(c);
		return 1;
	}
	if (nbytes > 0) {
		const uint8_t* p = mlx_array_data_uint8(c);
		if (p == NULL) {
			mlx_array_free(c);
			return 1;
		}
		memcpy(dst, p, nbytes);
	}
	mlx_array_free(c);
	return 0;
}

static int mlxeng_gpu_available(void) {
	mlx_device d = mlx_device_new_type(MLX_GPU, 0);
	bool ok = false;
	if (mlx_device_is_available(&ok, d) != 0) {
		ok = false;
	}
	mlx_device_free(d);
	return ok ? 1 : 0;
}

// mlxeng_make_home runs on the engine's home thread, once: it picks the device and
// makes the engine's stream there, and on a GPU a CPU stream beside it.
static int mlxeng_make_home(int gpu, mlx_stream* s, mlx_stream* host) {
	mlx_device d = mlx_device_new_type(gpu ? MLX_GPU : MLX_CPU, 0);
	int rc = mlx_set_default_device(d);
	mlx_device_free(d);
	if (rc != 0) {
		return rc;
	}
	*s = gpu ? mlx_default_gpu_stream_new() : mlx_default_cpu_stream_new();
	*host = gpu ? mlx_default_cpu_stream_new() : *s;
	if (s->ctx == NULL || host->ctx == NULL) {
		return 1;
	}
	mlxeng_stream = *s;
	mlxeng_home = 1;
	mlxeng_ready = 1;
	return 0;
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/dgtune/dgtune/mx"
)

// Error is the panic value of a failed MLX call.
type Error struct {
	Op  string // the mx op (or engine step) that called MLX
	Msg string // MLX's message, without the C source location
}

func (e *Error) Error() string { return "mlx: " + e.Op + ": " + e.Msg }

// Engine is the MLX engine. Its zero value is not usable; Open returns the one engine
// of the process.
type Engine struct {
	stream C.mlx_stream
	// cpuStream is MLX's CPU stream: stream itself on a CPU, a second one on a GPU, for
	// what the GPU cannot do or does differently: float64 arrays (neither Metal nor
	// MLX-CUDA has float64 kernels) and quantize (see Quantize).
	cpuStream C.mlx_stream
	device    string
	home      chan func() // work for the home thread, which owns the stream's encoder
	// tracer: work for the tracer thread, which compiles, traces and replays compiled
	// closures while home evaluates (threads.go); nil when MLXENG_TRACER=home.
	tracer chan func()
	// asyncFailed is a launched evaluation's failure (AsyncEval), raised by the next
	// call at home. Touched only on the home thread.
	asyncFailed any

	mu      sync.Mutex // guards scopes and pending
	scopes  [][]*array // arrays created in each open Tidy scope, innermost last
	pending []C.mlx_array
	npend   atomic.Int32 // len(pending), read without the lock on every op

	// recomputeFailed is a panic inside a checkpointed function that MLX re-ran while
	// differentiating; the value_and_grad that asked re-raises it. Touched only on the
	// thread that traces that value_and_grad (home, or the tracer inside a compiled
	// function), while the caller waits for it.
	recomputeFailed any

	// quantized is how quantized products are computed (see dequant.go).
	quantized quantizedRoute
	// denseForward is the dense products' forward policy (chooseDenseForward).
	denseForward denseForwardPolicy

	// adam holds the compiled AdamW updates (adam.go).
	adam adamCache

	// adamKernels: the multi-tensor AdamW kernel on CUDA when MLXENG_ADAM=kernel
	// (adam_kernel.go).
	adamKernels adamKernelCache

	// experts: which fused kernel (expertsKernels, by kind; experts.go) each direction
	// of the experts' products on the dequant route goes through, made at open on a
	// CUDA GPU unless MLXENG_EXPERTS=dequant.
	experts        expertsRoute
	expertsKernels [expertsKinds]C.mlx_fast_cuda_kernel

	// foldedSDPA: grouped-query attention folded into the query rows on CUDA when
	// MLXENG_SDPA=folded (sdpa.go).
	foldedSDPA bool
	// joinAttention: the model's fused forward makes one masked attention call over
	// its encoder and decoder rows where MLX has no fused attention, on CUDA unless
	// MLXENG_JOIN_ATTENTION=0 (sdpa.go).
	joinAttention bool

	// normKernel: rms_norm's input gradient through the engine's kernel on CUDA unless
	// MLXENG_NORM=mlx (rmsnorm.go).
	normKernel   C.mlx_fast_cuda_kernel
	normKernelOK bool

	// expertOrderKernel: mx.ExpertOrder in one kernel on CUDA unless
	// MLXENG_EXPERT_ORDER=mlx (expert_order.go).
	expertOrderKernel C.mlx_fast_cuda_kernel
	expertOrderOK     bool

	// normRoPE: mx.NormRoPE in the engine's kernels on CUDA unless MLXENG_NORM_ROPE=mlx
	// (norm_rope.go).
	normRoPE normRoPEKernels

	// geglu: the GeGLU activation through the engine's kernels on CUDA unless
	// MLXENG_GEGLU=mlx (geglu.go).
	geglu gegluKernels

	// rows: takes of rows through the engine's kernels on CUDA (rows.go).
	rows rowKernels

	// lora: LoRA adapters' terms through the engine's kernels on CUDA (lora.go).
	lora loraKernels

	// boolMasks passes boolean attention masks to MLX as they are instead of as additive
	// ones (fast.go: additiveMask); only a test sets it, to compare the two.
	boolMasks bool

	// fastDequant: bfloat16 and float32 dequantizes go through dequantKernel
	// (dequant_kernel.go), made at open on a CUDA GPU unless MLXENG_DEQUANTIZE=mlx.
	fastDequant   bool
	dequantKernel C.mlx_fast_cuda_kernel
}

// array is the engine's handle: one mlx_array reference plus the shape and dtype,
// cached because mx asks for them on every op.
type array struct {
	c       C.mlx_array
	shape   []int
	dt      mx.DType
	live    bool
	cleanup runtime.Cleanup
}

// cudaGraphCacheSize is the MLX_CUDA_GRAPH_CACHE_SIZE the engine sets when the user has
// not: room for the graphs of many batch shapes (see newEngine).
const cudaGraphCacheSize = 100000

// cudaOpsPerGraph is the MLX_MAX_OPS_PER_BUFFER the engine sets on Linux (see newEngine).
const cudaOpsPerGraph = 20

// open makes the engine once per process: MLX's error handler and default device are
// process-wide.
var open = sync.OnceValues(newEngine)

func init() {
	mx.Register("mlx", func() (mx.Engine, error) {
		e, err := open()
		if err != nil {
			return nil, err
		}
		return e, nil
	})
}

// Open returns the process's MLX engine.
func Open() (*Engine, error) { return open() }

func newEngine() (*Engine, error) {
	// MLX-CUDA caches one CUDA graph per distinct graph shape and throws ("Cache thrashing
	// is happening…") once it has missed its cache more than twice its capacity, counted
	// over the whole process: a training run whose batches vary in length meets that
	// after 800 shapes at MLX's default capacity of 400. MLX reads the variable when it
	// first touches the GPU, so it is set here, before, unless the user set it.
	if _, set := os.LookupEnv("MLX_CUDA_GRAPH_CACHE_SIZE"); !set {
		os.Setenv("MLX_CUDA_GRAPH_CACHE_SIZE", strconv.Itoa(cudaGraphCacheSize))
	}
	// MLX-CUDA multiplies float32 matrices in TF32 (10-bit mantissas) unless told not
	// to: on the H200 that moved the tiny model's float32 logits by 0.04 and LoRA
	// gradients by 5 % from the go engine's (tolerance 2e-3). compute_dtype float32
	// means float32, as in PyTorch (whose allow_tf32 is off by default), so TF32 is off
	// unless the user turns it on, or asks for bfloat16 compute (session.PrepareEngine turns
	// it on first: MLX's grouped GEMM uses tensor cores for bfloat16 only with it on).
	if _, set := os.LookupEnv("MLX_ENABLE_TF32"); !set {
		os.Setenv("MLX_ENABLE_TF32", "0")
	}
	// MLX-CUDA launches its kernels as CUDA graphs of up to 100 ops on Hopper and
	// updates each graph every step; with 20 ops a graph the H200 ran the real 26B-A4B
	// geometry's bf16 step in 753 ms instead of 1037 ms, the bench preset's in 64 ms
	// instead of 110 ms (bench/results/gpu-lease2.txt). Metal reads the same variable
	// for its command buffers, so it is left alone on macOS.
	if _, set := os.LookupEnv("MLX_MAX_OPS_PER_BUFFER"); !set && runtime.GOOS != "darwin" {
		os.Setenv("MLX_MAX_OPS_PER_BUFFER", strconv.Itoa(cudaOpsPerGraph))
	}
	// Without CUDA graphs at all the compiled step ran faster still: the bench preset's in
	// 33 ms instead of 47 (20 ops a graph), the small preset's in 54 instead of 82; the
	// uncompiled bench step within 5 % either way and the 6-layer real geometry's in 146
	// instead of 150 (bench/results/gpu-lease2.txt, gpu-lease4.txt). Nothing is cached
	// per graph shape then, so batches of many lengths neither fill MLX's graph cache nor
	// hold host memory for each shape. MLX_USE_CUDA_GRAPHS=1 brings them back.
	if _, set := os.LookupEnv("MLX_USE_CUDA_GRAPHS"); !set && runtime.GOOS != "darwin" {
		os.Setenv("MLX_USE_CUDA_GRAPHS", "0")
	}
	C.mlxeng_install_handler()
	e := &Engine{device: "cpu", home: make(chan func())}
	var g C.int
	if C.mlxeng_gpu_available() == 1 {
		e.device, g = "gpu", 1
	}
	started := make(chan error, 1)
	go e.serve(func() error {
		return e.try("select device", func() C.int { return C.mlxeng_make_home(g, &e.stream, &e.cpuStream) })
	}, started)
	if err := <-started; err != nil {
		return nil, fmt.Errorf("mlx: open engine: %w", err)
	}
	e.startTracer(os.Getenv(tracerEnv))
	e.quantized = chooseQuantizedRoute(e.device)
	e.denseForward = chooseDenseForwardPolicy()
	e.openExperts(os.Getenv(expertsEnv))
	e.dequantKernel, e.fastDequant = newDequantKernel(e.device)
	e.rows = newRowKernels(e.device)
	e.normKernel, e.normKernelOK = newNormKernel(e.device, os.Getenv(normEnv))
	e.geglu = newGeGLUKernels(e.device, os.Getenv(gegluEnv))
	e.expertOrderKernel, e.expertOrderOK = newExpertOrderKernel(e.device, os.Getenv(expertOrderEnv))
	e.normRoPE = newNormRoPEKernels(e.device, os.Getenv(normRoPEEnv))
	e.foldedSDPA = foldedSDPAOn(e.device, os.Getenv(sdpaEnv))
	e.joinAttention = joinAttentionOn(e.device, os.Getenv(joinAttentionEnv))
	e.lora = newLoRAKernels(e.device)
	e.adamKernels.on = adamKernelOn(e.device, os.Getenv(adamKernelEnv))
	if e.device == "gpu" {
		// MLX's own limit is 95 % of the card; start well inside it (callers may set
		// another with mx.SetMemoryLimit).
		d, err := e.DeviceInfo()
		if err != nil {
			return nil, fmt.Errorf("mlx: open engine: %w", err)
		}
		if d.TotalMemory > 0 {
			if _, err := e.SetMemoryLimit(defaultMemoryLimit(d.TotalMemory)); err != nil {
				return nil, fmt.Errorf("mlx: open engine: %w", err)
			}
		}
	}
	return e, nil
}

// isCUDA: a device of MLX's CUDA backend (a GPU that is not Apple's).
func isCUDA(device string) bool { return device == "gpu" && runtime.GOOS != "darwin" }

// Name implements mx.Engine.
func (e *Engine) Name() string { return "mlx" }

// Device is "gpu" when MLX runs on Metal or CUDA, else "cpu".
func (e *Engine) Device() string { return e.device }

// try runs one mlx-c call on a locked OS thread and returns its failure as an *Error.
func (e *Engine) try(op string, f func() C.int) error {
	runtime.LockOSThread()
	rc := C.mlxeng_begin()
	if rc == 0 {
		rc = f()
	}
	var msg string
	if rc != 0 {
		msg = C.GoString(C.mlxeng_message())
	}
	runtime.UnlockOSThread()
	if rc == 0 {
		return nil
	}
	return &Error{Op: op, Msg: cleanMessage(msg, rc)}
}

// run is try for ops: a failure panics (mx's contract for misuse).
func (e *Engine) run(op string, f func() C.int) {
	if err := e.try(op, f); err != nil {
		panic(err)
	}
}

// op runs an mlx-c function that writes one array and wraps the result.
func (e *Engine) op(name string, f func(res *C.mlx_array) C.int) *array {
	var res C.mlx_array
	if err := e.try(name, func() C.int { return f(&res) }); err != nil {
		if res.ctx != nil {
			C.mlx_array_free(res)
		}
		panic(err)
	}
	return e.wrap(res)
}

// cleanMessage drops the " at file.cpp:line" suffix mlx-c appends.
func cleanMessage(msg string, rc C.int) string {
	if i := strings.LastIndex(msg, " at "); i > 0 && strings.Contains(msg[i:], ".cpp:") {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = fmt.Sprintf("failed with status %d", int(rc))
	}
	return msg
}

// wrap adopts one mlx_array reference as a handle, recording it in the innermost
// scope.
func (e *Engine) wrap(c C.mlx_array) *array {
	if c.ctx == nil {
		panic(&Error{Op: "wrap", Msg: "MLX returned an empty array"})
	}
	if e.npend.Load() > 0 {
		e.drain()
	}
	var buf [16]C.int
	var dt C.int
	nd := int(C.mlxeng_info(c, &buf[0], C.int(len(buf)), &dt))
	shape := make([]int, nd)
	if nd > len(buf) {
		big := make([]C.int, nd)
		C.mlxeng_info(c, &big[0], C.int(nd), &dt)
		for i := range shape {
			shape[i] = int(big[i])
		}
	} else {
		for i := range shape {
			shape[i] = int(buf[i])
		}
	}
	a := &array{c: c, shape: shape, dt: fromMLX(C.mlx_dtype(dt)), live: true}
	a.cleanup = runtime.AddCleanup(a, e.release, c.ctx)
	e.mu.Lock()
	if n := len(e.scopes); n > 0 {
		e.scopes[n-1] = append(e.scopes[n-1], a)
	}
	e.mu.Unlock()
	return a
}

// release runs on the garbage collector's cleanup goroutine for arrays nobody freed.
// MLX is driven from the engine's goroutine, so the reference is queued and freed by
// the next op there.
func (e *Engine) release(ctx unsafe.Pointer) {
	e.mu.Lock()
	e.pending = append(e.pending, C.mlx_array{ctx: ctx})
	e.npend.Store(int32(len(e.pending)))
	e.mu.Unlock()
}

func (e *Engine) drain() {
	e.mu.Lock()
	p := e.pending
	e.pending = nil
	e.npend.Store(0)
	e.mu.Unlock()
	for _, c := range p {
		C.mlx_array_free(c)
	}
}

func (e *Engine) free(a *array) {
	if !a.live {
		return
	}
	a.live = false
	a.cleanup.Stop()
	C.mlx_array_free(a.c)
	a.c = C.mlx_array{}
}

// meta returns the handle behind h, live or freed.
func meta(h mx.Handle) *array {
	a, ok := h.(*array)
	if !ok || a == nil {
		panic(fmt.Sprintf("mlx: foreign handle %T", h))
	}
	return a
}

// get returns the live handle behind h.
func get(h mx.Handle) *array {
	a := meta(h)
	if !a.live {
		panic(&Error{Op: "use", Msg: fmt.Sprintf("array %v %s was already freed (by Free, or by the end of the Tidy or ValueAndGrad function that made it)", a.shape, a.dt)})
	}
	return a
}

// Free implements mx.Engine.
func (e *Engine) Free(h mx.Handle) {
	if a, ok := h.(*array); ok && a != nil {
		e.free(a)
	}
}

// PushScope implements mx.Engine.
func (e *Engine) PushScope() {
	e.mu.Lock()
	e.scopes = append(e.scopes, nil)
	e.mu.Unlock()
}

// PopScope implements mx.Engine: arrays made in the scope and not kept are freed; the
// kept ones move to the enclosing scope, so an outer Tidy still owns them.
func (e *Engine) PopScope(keep []mx.Handle) {
	e.mu.Lock()
	n := len(e.scopes)
	if n == 0 {
		e.mu.Unlock()
		panic("mlx: PopScope without PushScope")
	}
	top := e.scopes[n-1]
	e.scopes[n-1] = nil
	e.scopes = e.scopes[:n-1]
	kept := make(map[*array]bool, len(keep))
	for _, h := range keep {
		if a, ok := h.(*array); ok && a != nil {
			kept[a] = true
		}
	}
	var free []*array
	for _, a := range top {
		switch {
		case !a.live:
		case kept[a]:
			if n > 1 {
				e.scopes[n-2] = append(e.scopes[n-2], a)
			}
		default:
			free = append(free, a)
		}
	}
	e.mu.Unlock()
	for _, a := range free {
		e.free(a)
	}
}

// Live counts the arrays held by open scopes; tests use it to check that scopes
// release what they made.
func (e *Engine) Live() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, s := range e.scopes {
		for _, a := range s {
			if a.live {
				n++
			}
		}
	}
	return n
}

// ActiveMemory is the number of bytes MLX's allocator has handed out and not
// reclaimed.
func (e *Engine) ActiveMemory() (int64, error) {
	var n C.size_t
	if err := e.try("active memory", func() C.int { return C.mlx_get_active_memory(&n) }); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// MemoryStats implements mx.MemoryReporter with MLX's allocator counters:
// mlx_get_active_memory, mlx_get_peak_memory and mlx_get_cache_memory.
func (e *Engine) MemoryStats() (mx.MemoryStats, error) {
	var active, peak, cache C.size_t
	err := e.try("memory stats", func() C.int {
		if rc := C.mlx_get_active_memory(&active); rc != 0 {
			return rc
		}
		if rc := C.mlx_get_peak_memory(&peak); rc != 0 {
			return rc
		}
		return C.mlx_get_cache_memory(&cache)
	})
	if err != nil {
		return mx.MemoryStats{}, err
	}
	return mx.MemoryStats{Active: int64(active), Peak: int64(peak), Cache: int64(cache)}, nil
}

// streamFor is the stream of an op that makes or reads arrays of these dtypes:
// cpuStream if any is float64, else the engine's. Only creation, casts and reads take
// it: float64 arithmetic on a GPU engine fails, as in MLX itself.
func (e *Engine) streamFor(dts ...mx.DType) C.mlx_stream {
	for _, dt := range dts {
		if dt == mx.Float64 {
			return e.cpuStream
		}
	}
	return e.stream
}

// closure makes the mlx_closure whose payload is the cgo handle id.
func closure(id uintptr) C.mlx_closure { return C.mlxeng_closure(C.uintptr_t(id)) }

// ownedClosure is closure for a handle that MLX deletes when it drops the closure.
func ownedClosure(id uintptr) C.mlx_closure { return C.mlxeng_owned_closure(C.uintptr_t(id)) }

// read evaluates a and copies its nbytes row-major bytes to p.
func (e *Engine) read(a *array, p unsafe.Pointer, nbytes int) {
	e.atHome(func() {
		e.run("eval", func() C.int { return C.mlxeng_read(a.c, e.streamFor(a.dt), p, C.size_t(nbytes)) })
	})
}

// vector makes an mlx_vector_array holding new references to the handles' arrays; the
// caller frees it.
func vector(hs []mx.Handle) C.mlx_vector_array {
	cs := make([]C.mlx_array, len(hs))
	for i, h := range hs {
		cs[i] = get(h).c
	}
	if len(cs) == 0 {
		return C.mlx_vector_array_new()
	}
	return C.mlx_vector_array_new_data(&cs[0], C.size_t(len(cs)))
}

// unpack wraps every array of v as a new handle.
func (e *Engine) unpack(op string, v C.mlx_vector_array) []*array {
	n := int(C.mlx_vector_array_size(v))
	out := make([]*array, n)
	for i := range out {
		out[i] = e.op(op, func(res *C.mlx_array) C.int { return C.mlx_vector_array_get(res, v, C.size_t(i)) })
	}
	return out
}

// handles lists arrays as mx handles.
func handles(as []*array) []mx.Handle {
	out := make([]mx.Handle, len(as))
	for i, a := range as {
		out[i] = a
	}
	return out
}

func cints(s []int) []C.int {
	out := make([]C.int, len(s))
	for i, v := range s {
		out[i] = C.int(v)
	}
	return out
}

// ptr returns a pointer to the first element, or to a dummy when s is empty (mlx-c
// reads nothing then, but some paths dislike NULL).
func ptr(s []C.int) *C.int {
	if len(s) == 0 {
		var dummy C.int
		return &dummy
	}
	return &s[0]
}

func toMLX(dt mx.DType) C.mlx_dtype {
	switch dt {
	case mx.Float32:
		return C.MLX_FLOAT32
	case mx.Float16:
		return C.MLX_FLOAT16
	case mx.BFloat16:
		return C.MLX_BFLOAT16
	case mx.Float64:
		return C.MLX_FLOAT64
	case mx.Int32:
		return C.MLX_INT32
	case mx.Int64:
		return C.MLX_INT64
	case mx.Uint32:
		return C.MLX_UINT32
	case mx.Uint8:
		return C.MLX_UINT8
	case mx.Bool:
		return C.MLX_BOOL
	}
	panic(fmt.Sprintf("mlx: dtype %s has no MLX equivalent", dt))
}

func fromMLX(dt C.mlx_dtype) mx.DType {
	switch dt {
	case C.MLX_FLOAT32:
		return mx.Float32
	case C.MLX_FLOAT16:
		return mx.Float16
	case C.MLX_BFLOAT16:
		return mx.BFloat16
	case C.MLX_FLOAT64:
		return mx.Float64
	case C.MLX_INT32:
		return mx.Int32
	case C.MLX_INT64:
		return mx.Int64
	case C.MLX_UINT32:
		return mx.Uint32
	case C.MLX_UINT8:
		return mx.Uint8
	case C.MLX_BOOL:
		return mx.Bool
	}
	// MLX types mx does not name (int8, int16, uint16, uint64, complex64) never leave
	// the engine: ops that could produce them cast first.
	return mx.DType(-1 - int(dt))
}
