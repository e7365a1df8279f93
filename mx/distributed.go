package mx

import (
	"errors"
	"fmt"
	"slices"
)

// ErrNoBackend is a distributed backend that this build of the engine does not have
// (MLX has NCCL only when built with CUDA and NCCL).
var ErrNoBackend = errors.New("no such distributed backend in this build")

// Distributed is the optional capability of an engine that can join a group of
// processes and reduce arrays across it (MLX's distributed layer: ring over TCP or
// Thunderbolt, NCCL between GPUs, MPI). The go engine does not have it.
type Distributed interface {
	// JoinGroup joins the group the environment describes (MLX_RANK + MLX_HOSTFILE for
	// the ring; MLX_RANK, MLX_WORLD_SIZE, NCCL_HOST_IP and NCCL_PORT for NCCL; mpirun's
	// variables for MPI) with backend "ring", "nccl", "mpi" or "any". With strict,
	// failing to form a group of the backend is an error; without, a process nobody
	// launched as a rank gets a group of one. It blocks until every rank has connected.
	// A backend the build lacks is an error wrapping ErrNoBackend.
	JoinGroup(backend string, strict bool) (GroupImpl, error)
	// HasBackend reports whether this build has the named backend.
	HasBackend(backend string) bool
}

// GroupImpl is an engine's group. Callers use Group.
type GroupImpl interface {
	Rank() int
	Size() int
	// AllSum returns the elementwise sum of x over every rank; every rank must call it
	// with the same shape and dtype, in the same order as the other collectives.
	AllSum(x Handle) Handle
	// Close ends this process's part in the group: no collective may follow.
	Close() error
}

// Group is a set of processes (ranks) that reduce arrays together. Its collectives are
// evaluated eagerly and return an error when the group breaks (a peer died or hung up),
// because a lost network peer is not a programming error.
type Group struct {
	e Engine
	g GroupImpl
}

// HasDistributed reports whether e can join a group of more than one process.
func HasDistributed(e Engine) bool {
	_, ok := e.(Distributed)
	return ok
}

// HasBackend reports whether e can join groups of the named distributed backend (false
// for an engine without a distributed layer).
func HasBackend(e Engine, backend string) bool {
	d, ok := e.(Distributed)
	return ok && d.HasBackend(backend)
}

// JoinGroup joins the group of processes the environment describes; see
// Distributed.JoinGroup. An engine without a distributed layer returns an error that
// says how to get one.
func JoinGroup(e Engine, backend string, strict bool) (*Group, error) {
	switch backend {
	case "ring", "nccl", "mpi", "any":
	default:
		return nil, fmt.Errorf("mx: distributed backend %q: want ring, nccl, mpi or any", backend)
	}
	d, ok := e.(Distributed)
	if !ok {
		return nil, fmt.Errorf("mx: the %s engine cannot join a distributed group: build with -tags mlx (see README) and use backend mlx", e.Name())
	}
	g, err := d.JoinGroup(backend, strict)
	if err != nil {
		return nil, err
	}
	return &Group{e: e, g: g}, nil
}

// Rank is this process's index in the group, 0 ≤ Rank < Size.
func (g *Group) Rank() int { return g.g.Rank() }

// Size is the number of processes in the group (the world size).
func (g *Group) Size() int { return g.g.Size() }

// Engine is the engine the group's arrays live on.
func (g *Group) Engine() Engine { return g.e }

// AllSum returns, for each array of xs, its elementwise sum over every rank, evaluated.
// Every rank must pass arrays of the same shapes and dtypes. The result of a group of
// one is xs itself. An error means the group is broken: the other ranks cannot be
// reached any more, and no further collective will succeed.
func (g *Group) AllSum(xs ...*Array) (out []*Array, err error) {
	for i, x := range xs {
		if x.e != g.e {
			panic(fmt.Sprintf("mx: AllSum: argument %d is on engine %s, the group on %s", i, x.e.Name(), g.e.Name()))
		}
	}
	if g.Size() == 1 {
		return slices.Clone(xs), nil
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			out, err = nil, fmt.Errorf("all_sum over %d ranks: %w", g.Size(), e)
		}
	}()
	out = make([]*Array, len(xs))
	for i, x := range xs {
		out[i] = Wrap(g.e, g.g.AllSum(x.h))
	}
	Eval(out...)
	return out, nil
}

// Close ends this process's part in the group, after its last collective (for MPI,
// MPI_Finalize, which waits for the other ranks to close too; without it mpirun reports
// the job as failed).
func (g *Group) Close() error { return g.g.Close() }
