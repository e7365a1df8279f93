package launch

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// World is how this process was started: alone, or as one rank of a group.
type World struct {
	Backend string   // "" alone; otherwise the MLX backend to join: ring, mpi or any
	Size    int      // the world size the environment describes; 0 when MLX decides
	Rank    int      // this process's rank, as the environment says
	Addrs   []string // ring: each rank's first "ip:port" from the hostfile
	Source  string   // where size and rank came from, for messages
}

// InsideRank reports whether the environment says this process is itself a rank of a
// ring (MLX_RANK or MLX_HOSTFILE set): ranks it started would join that ring's variables.
func InsideRank(getenv func(string) string) bool {
	return getenv("MLX_RANK") != "" || getenv("MLX_HOSTFILE") != ""
}

// Detect reads how the ranks were started the way MLX does: the ring from
// MLX_RANK and MLX_HOSTFILE (what mlx.launch and train --launch set), MPI from
// mpirun's variables. distributed is the config key: "" joins a group only when the
// environment describes more than one rank, ring and mpi insist on that backend, any
// lets MLX choose (a group of one when nothing describes a group).
func Detect(distributed string, getenv func(string) string) (World, error) {
	rankVar, hostfile := getenv("MLX_RANK"), getenv("MLX_HOSTFILE")
	ring := rankVar != "" && hostfile != ""
	mpiSize, mpiRank, mpi := mpiEnv(getenv)
	alone := World{Size: 1}
	switch distributed {
	case "", "any", "ring":
		if ring {
			w, err := ringWorld(rankVar, hostfile)
			if err != nil || w.Size == 1 {
				return alone, err
			}
			return w, nil
		}
		if distributed == "ring" {
			return alone, fmt.Errorf("distributed: ring needs MLX_RANK and MLX_HOSTFILE in the environment (train --launch N or mlx.launch set them; see README)")
		}
		if mpi && mpiSize > 1 {
			return World{Backend: "mpi", Size: mpiSize, Rank: mpiRank, Source: "mpirun"}, nil
		}
		if distributed == "any" {
			return World{Backend: "any", Source: "distributed: any"}, nil
		}
		return alone, nil
	case "mpi":
		if mpi {
			if mpiSize == 1 {
				return alone, nil
			}
			return World{Backend: "mpi", Size: mpiSize, Rank: mpiRank, Source: "mpirun"}, nil
		}
		return World{Backend: "mpi", Source: "distributed: mpi"}, nil
	}
	return alone, fmt.Errorf("distributed %q: want ring, mpi, any or empty", distributed)
}

// mpiEnv reads the world size and rank that Open MPI's or MPICH's mpirun give each
// process.
func mpiEnv(getenv func(string) string) (size, rank int, ok bool) {
	for _, v := range [][2]string{{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, {"PMI_SIZE", "PMI_RANK"}} {
		s, err1 := strconv.Atoi(getenv(v[0]))
		r, err2 := strconv.Atoi(getenv(v[1]))
		if err1 == nil && err2 == nil && s > 0 {
			return s, r, true
		}
	}
	return 0, 0, false
}

// ringWorld reads MLX's ring hostfile: a JSON list with one entry per rank, each an
// "ip:port" string or a list of them (one per connection), as mlx.launch writes it. An
// empty file (mlx.launch's for a single host) is a group of one.
func ringWorld(rankVar, hostfile string) (World, error) {
	b, err := os.ReadFile(hostfile)
	if err != nil {
		return World{}, fmt.Errorf("MLX_HOSTFILE: %w", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return World{Size: 1}, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("MLX_HOSTFILE %s: %s (want a JSON list with one entry per rank, each \"ip:port\" or a list of them)", hostfile, fmt.Sprintf(format, args...))
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(b, &entries); err != nil {
		return World{}, bad("%v", err)
	}
	if len(entries) == 0 {
		return World{}, bad("no ranks")
	}
	w := World{Backend: "ring", Size: len(entries), Source: "MLX_HOSTFILE " + hostfile}
	for i, raw := range entries {
		var addrs []string
		var one string
		if json.Unmarshal(raw, &one) == nil {
			addrs = []string{one}
		} else if err := json.Unmarshal(raw, &addrs); err != nil || len(addrs) == 0 {
			return World{}, bad("rank %d: %s is neither an address nor a list of addresses", i, raw)
		}
		for _, a := range addrs {
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				return World{}, bad("rank %d: %q is not ip:port", i, a)
			}
		}
		w.Addrs = append(w.Addrs, addrs[0])
	}
	w.Rank, err = strconv.Atoi(rankVar)
	if err != nil || w.Rank < 0 || w.Rank >= w.Size {
		return World{}, fmt.Errorf("MLX_RANK %q: want a rank in 0..%d, the ranks of MLX_HOSTFILE %s", rankVar, w.Size-1, hostfile)
	}
	return w, nil
}

// HostOf is the host part of "ip:port".
func HostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
