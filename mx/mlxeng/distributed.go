//go:build mlx

package mlxeng

/*
#include <dlfcn.h>
#include <stdlib.h>
#include "mlx/c/mlx.h"

// mlxeng_mpi_finalize calls MPI_Finalize in the libmpi MLX loaded (RTLD_GLOBAL), once.
// MLX finalizes only from a static destructor, which a Go program's exit never runs.
static int mlxeng_mpi_finalize(void) {
	int (*finalized)(int*) = (int (*)(int*))dlsym(RTLD_DEFAULT, "MPI_Finalized");
	int (*finalize)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "MPI_Finalize");
	if (finalized == NULL || finalize == NULL) {
		return -1;
	}
	int done = 0;
	if (finalized(&done) != 0 || done) {
		return 0;
	}
	return finalize();
}

// mlxeng_comm_stream is the stream collectives run on: MLX's ring and MPI backends
// reduce on the CPU, so on a GPU engine they get the home thread's CPU stream (cpu
// set); NCCL reduces on the GPU, in the engine's own stream.
static int mlxeng_comm_stream(int cpu, mlx_stream engine, mlx_stream* s) {
	if (!cpu) {
		*s = engine;
		return 0;
	}
	*s = mlx_default_cpu_stream_new();
	return s->ctx == NULL;
}

// mlxeng_gpu_count is the number of GPUs MLX sees (cudaGetDeviceCount on CUDA).
static int mlxeng_gpu_count(int* n) {
	return mlx_device_count(n, MLX_GPU);
}
*/
import "C"

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/dgtune/dgtune/mx"
)

// group is an MLX distributed group and the stream its collectives run on.
type group struct {
	e       *Engine
	c       C.mlx_distributed_group
	stream  C.mlx_stream
	backend string
	rank    int
	size    int
}

// HasBackend implements mx.Distributed with mlx_distributed_is_available: MLX has
// the ring on every Unix, MPI where it can load libmpi, NCCL only when built with CUDA
// and NCCL (its CPU and Metal builds have none).
func (e *Engine) HasBackend(backend string) bool {
	bk := C.CString(backend)
	defer C.free(unsafe.Pointer(bk))
	var ok C.bool
	e.atHome(func() { ok = C.mlx_distributed_is_available(bk) })
	return bool(ok)
}

// JoinGroup implements mx.Distributed with mlx_distributed_init. MLX keeps one group
// per backend for the life of the process, so joining twice returns the same group.
// It runs on the engine's home thread and blocks there until the ring (or NCCL, or
// MPI) has formed; a rank that never connects keeps it blocked, so callers bound the
// wait themselves.
func (e *Engine) JoinGroup(backend string, strict bool) (mx.GroupImpl, error) {
	if backend == "nccl" {
		if err := e.ncclReady(); err != nil {
			return nil, fmt.Errorf("mlx: join the nccl group: %w", err)
		}
	}
	// MLX's ring writes to its sockets with send(2) without MSG_NOSIGNAL, from threads
	// of its own: a peer that died would raise SIGPIPE there and kill this process
	// before MLX could report "connection to a peer was lost". Ignored, the write fails
	// with EPIPE and MLX turns that into an error. (Writes to a closed stdout then fail
	// with EPIPE too instead of ending the process.)
	signal.Ignore(syscall.SIGPIPE)
	g := &group{e: e, c: C.mlx_distributed_group_new(), backend: backend}
	bk := C.CString(backend)
	defer C.free(unsafe.Pointer(bk))
	var err error
	e.atHome(func() {
		if err = e.try("distributed init", func() C.int { return C.mlx_distributed_init(&g.c, C.bool(strict), bk) }); err != nil {
			return
		}
		cpu := C.int(0)
		if e.device == "gpu" && backend != "nccl" {
			cpu = 1
		}
		err = e.try("distributed stream", func() C.int { return C.mlxeng_comm_stream(cpu, e.stream, &g.stream) })
	})
	if err != nil {
		if g.c.ctx != nil {
			C.mlx_distributed_group_free(g.c)
		}
		return nil, fmt.Errorf("mlx: join the %s group: %w", backend, err)
	}
	if err := e.try("distributed group", func() C.int {
		g.rank = int(C.mlx_distributed_group_rank(g.c))
		g.size = int(C.mlx_distributed_group_size(g.c))
		return 0
	}); err != nil {
		return nil, err
	}
	if g.size < 1 || g.rank < 0 || g.rank >= g.size {
		return nil, fmt.Errorf("mlx: distributed init gave rank %d of %d", g.rank, g.size)
	}
	return g, nil
}

// ncclReady checks what MLX's NCCL backend needs of this process before it joins:
// MLX built with it (a CPU build's strict init would only throw "Cannot initialize nccl
// distributed backend"), the engine on the GPU (NCCL reduces GPU arrays), and a GPU
// that stays the engine's. MLX's NCCL group calls cudaSetDevice(rank mod the GPUs it
// sees) after the engine has started on GPU 0, so a rank other than 0 that sees several
// GPUs would reduce on one GPU and compute on another: each rank must see its own GPU
// alone (CUDA_VISIBLE_DEVICES, as train --launch and mlx.launch set it). It also keeps
// NVLink multicast off (NCCL_NVLS_ENABLE=0) unless the user set it: on a host whose
// GPUs others share, a job that uses it can put them out of service.
func (e *Engine) ncclReady() error {
	if !e.HasBackend("nccl") {
		return fmt.Errorf("%w: MLX has NCCL only when built with CUDA and NCCL", mx.ErrNoBackend)
	}
	if e.device != "gpu" {
		return fmt.Errorf("MLX's NCCL backend reduces GPU arrays, and this engine runs on the CPU (no GPU available to MLX)")
	}
	var n C.int
	var err error
	e.atHome(func() { err = e.try("gpu count", func() C.int { return C.mlxeng_gpu_count(&n) }) })
	if err != nil {
		return err
	}
	if rank, perr := strconv.Atoi(os.Getenv("MLX_RANK")); perr == nil && n > 1 && rank%int(n) != 0 {
		visible := "CUDA_VISIBLE_DEVICES unset"
		if v, set := os.LookupEnv("CUDA_VISIBLE_DEVICES"); set {
			visible = "CUDA_VISIBLE_DEVICES=" + v
		}
		return fmt.Errorf("rank %d sees %d GPUs (%s): MLX's NCCL backend would move it to GPU %d after this engine started on GPU 0; give each rank a GPU of its own with CUDA_VISIBLE_DEVICES (train --launch and mlx.launch do)", rank, int(n), visible, rank%int(n))
	}
	if _, set := os.LookupEnv("NCCL_NVLS_ENABLE"); !set {
		os.Setenv("NCCL_NVLS_ENABLE", "0")
	}
	return nil
}

func (g *group) Rank() int { return g.rank }
func (g *group) Size() int { return g.size }

// AllSum implements mx.GroupImpl: a lazy all_sum, evaluated with the rest of the graph.
func (g *group) AllSum(x mx.Handle) mx.Handle {
	a := get(x)
	return g.e.op("all_sum", func(res *C.mlx_array) C.int {
		return C.mlx_distributed_all_sum(res, a.c, g.c, g.stream)
	})
}

// Close implements mx.GroupImpl. For MPI it calls MPI_Finalize on the home thread,
// where MLX called MPI_Init; the ring needs nothing (its sockets close with the
// process). A group joined with "any" is not finalized: MLX does not say which backend
// it picked.
func (g *group) Close() error {
	if g.backend != "mpi" || g.size == 1 {
		return nil
	}
	var rc C.int
	g.e.atHome(func() { rc = C.mlxeng_mpi_finalize() })
	if rc != 0 {
		return fmt.Errorf("mlx: MPI_Finalize failed (%d)", int(rc))
	}
	return nil
}
