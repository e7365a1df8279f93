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
// reduce on the CPU, so on a GPU engine they get the home thread's CPU stream.
static int mlxeng_comm_stream(int gpu, mlx_stream engine, mlx_stream* s) {
	if (!gpu) {
		*s = engine;
		return 0;
	}
	*s = mlx_default_cpu_stream_new();
	return s->ctx == NULL;
}
*/
import "C"

import (
	"fmt"
	"os/signal"
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

// JoinGroup implements mx.Distributed with mlx_distributed_init. MLX keeps one group
// per backend for the life of the process, so joining twice returns the same group.
// It runs on the engine's home thread and blocks there until the ring (or MPI) has
// formed; a rank that never connects keeps it blocked, so callers bound the wait
// themselves.
func (e *Engine) JoinGroup(backend string, strict bool) (mx.GroupImpl, error) {
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
		gpu := C.int(0)
		if e.device == "gpu" {
			gpu = 1
		}
		err = e.try("distributed stream", func() C.int { return C.mlxeng_comm_stream(gpu, e.stream, &g.stream) })
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
