package train

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// launch is how this process was started: alone, or as one rank of a group.
type launch struct {
	backend string   // "" alone; otherwise the MLX backend to join: ring, mpi or any
	size    int      // the world size the environment describes; 0 when MLX decides
	rank    int      // this process's rank, as the environment says
	addrs   []string // ring: each rank's first "ip:port" from the hostfile
	source  string   // where size and rank came from, for messages
}

// detectLaunch reads how the ranks were started the way MLX does: the ring from
// MLX_RANK and MLX_HOSTFILE (what mlx.launch and train --launch set), MPI from
// mpirun's variables. distributed is the config key: "" joins a group only when the
// environment describes more than one rank, ring and mpi insist on that backend, any
// lets MLX choose (a group of one when nothing describes a group).
func detectLaunch(distributed string, getenv func(string) string) (launch, error) {
	rankVar, hostfile := getenv("MLX_RANK"), getenv("MLX_HOSTFILE")
	ring := rankVar != "" && hostfile != ""
	mpiSize, mpiRank, mpi := mpiEnv(getenv)
	alone := launch{size: 1}
	switch distributed {
	case "", "any", "ring":
		if ring {
			l, err := ringLaunch(rankVar, hostfile)
			if err != nil || l.size == 1 {
				return alone, err
			}
			return l, nil
		}
		if distributed == "ring" {
			return alone, fmt.Errorf("distributed: ring needs MLX_RANK and MLX_HOSTFILE in the environment (train --launch N or mlx.launch set them; see README)")
		}
		if mpi && mpiSize > 1 {
			return launch{backend: "mpi", size: mpiSize, rank: mpiRank, source: "mpirun"}, nil
		}
		if distributed == "any" {
			return launch{backend: "any", source: "distributed: any"}, nil
		}
		return alone, nil
	case "mpi":
		if mpi {
			if mpiSize == 1 {
				return alone, nil
			}
			return launch{backend: "mpi", size: mpiSize, rank: mpiRank, source: "mpirun"}, nil
		}
		return launch{backend: "mpi", source: "distributed: mpi"}, nil
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

// ringLaunch reads MLX's ring hostfile: a JSON list with one entry per rank, each an
// "ip:port" string or a list of them (one per connection), as mlx.launch writes it. An
// empty file (mlx.launch's for a single host) is a group of one.
func ringLaunch(rankVar, hostfile string) (launch, error) {
	b, err := os.ReadFile(hostfile)
	if err != nil {
		return launch{}, fmt.Errorf("MLX_HOSTFILE: %w", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return launch{size: 1}, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("MLX_HOSTFILE %s: %s (want a JSON list with one entry per rank, each \"ip:port\" or a list of them)", hostfile, fmt.Sprintf(format, args...))
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(b, &entries); err != nil {
		return launch{}, bad("%v", err)
	}
	if len(entries) == 0 {
		return launch{}, bad("no ranks")
	}
	l := launch{backend: "ring", size: len(entries), source: "MLX_HOSTFILE " + hostfile}
	for i, raw := range entries {
		var addrs []string
		var one string
		if json.Unmarshal(raw, &one) == nil {
			addrs = []string{one}
		} else if err := json.Unmarshal(raw, &addrs); err != nil || len(addrs) == 0 {
			return launch{}, bad("rank %d: %s is neither an address nor a list of addresses", i, raw)
		}
		for _, a := range addrs {
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				return launch{}, bad("rank %d: %q is not ip:port", i, a)
			}
		}
		l.addrs = append(l.addrs, addrs[0])
	}
	l.rank, err = strconv.Atoi(rankVar)
	if err != nil || l.rank < 0 || l.rank >= l.size {
		return launch{}, fmt.Errorf("MLX_RANK %q: want a rank in 0..%d, the ranks of MLX_HOSTFILE %s", rankVar, l.size-1, hostfile)
	}
	return l, nil
}

// hostOf is the host part of "ip:port".
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
