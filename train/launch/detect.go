package launch

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// World is how this process was started: alone, or as one rank of a group.
type World struct {
	Backend string   // "" alone; otherwise the MLX backend to join: ring, nccl, mpi or any
	Size    int      // the world size the environment describes; 0 when MLX decides
	Rank    int      // this process's rank, as the environment says
	Addrs   []string // ring: each rank's first "ip:port" from the hostfile
	// Coordinator is NCCL's rank 0, "host:port" from NCCL_HOST_IP and NCCL_PORT: where
	// the other ranks fetch NCCL's id (nccl only).
	Coordinator string
	Source      string // where size and rank came from, for messages
}

// ncclVars are the variables MLX's NCCL backend reads, all of which it requires (what
// mlx.launch --backend nccl and train --launch set).
var ncclVars = [...]string{"MLX_RANK", "MLX_WORLD_SIZE", "NCCL_HOST_IP", "NCCL_PORT"}

// InsideRank reports whether the environment says this process is itself a rank of a
// group (MLX_RANK, MLX_HOSTFILE or MLX_WORLD_SIZE set): ranks it started would join that
// group's variables.
func InsideRank(getenv func(string) string) bool {
	return getenv("MLX_RANK") != "" || getenv("MLX_HOSTFILE") != "" || getenv("MLX_WORLD_SIZE") != ""
}

// Detect reads how the ranks were started the way MLX does: the ring from MLX_RANK and
// MLX_HOSTFILE (mlx.launch --backend ring, train --launch), NCCL from MLX_RANK,
// MLX_WORLD_SIZE, NCCL_HOST_IP and NCCL_PORT (mlx.launch --backend nccl, train --launch
// on GPUs), MPI from mpirun's variables. distributed is the config key: "" joins a
// group only when the environment describes more than one rank, ring, nccl and mpi
// insist on that backend, any lets MLX choose (a group of one when nothing describes a
// group).
//
// Where the environment describes more than one group, "" and any take them in MLX's
// own order for its backend "any": NCCL when this build has it (MLX tries NCCL first on
// a CUDA build), then the ring, then MPI. hasNCCL says whether this build's MLX has the
// NCCL backend; it is asked only to settle that order. An NCCL group described alone is
// joined as NCCL, so that a build without it fails saying so instead of running alone.
func Detect(distributed string, getenv func(string) string, hasNCCL func() bool) (World, error) {
	rankVar, hostfile := getenv("MLX_RANK"), getenv("MLX_HOSTFILE")
	ring := rankVar != "" && hostfile != ""
	missing := missingNCCL(getenv)
	nccl := len(missing) == 0
	mpiSize, mpiRank, mpi := mpiEnv(getenv)
	alone := World{Size: 1}
	switch distributed {
	case "", "any":
		if nccl && (!ring && !(mpi && mpiSize > 1) || hasNCCL()) {
			return ncclWorld(getenv)
		}
		if ring {
			w, err := ringWorld(rankVar, hostfile)
			if err != nil || w.Size == 1 {
				return alone, err
			}
			return w, nil
		}
		if mpi && mpiSize > 1 {
			return World{Backend: "mpi", Size: mpiSize, Rank: mpiRank, Source: "mpirun"}, nil
		}
		if getenv("MLX_WORLD_SIZE") != "" {
			// MLX_WORLD_SIZE is NCCL's alone: a launch for NCCL that lost a variable.
			return alone, ncclMissingError("MLX_WORLD_SIZE is set, but", missing)
		}
		if distributed == "any" {
			return World{Backend: "any", Source: "distributed: any"}, nil
		}
		return alone, nil
	case "ring":
		if ring {
			w, err := ringWorld(rankVar, hostfile)
			if err != nil || w.Size == 1 {
				return alone, err
			}
			return w, nil
		}
		return alone, fmt.Errorf("distributed: ring needs MLX_RANK and MLX_HOSTFILE in the environment (train --launch N or mlx.launch set them; see README)")
	case "nccl":
		if !nccl {
			return alone, ncclMissingError("distributed: nccl:", missing)
		}
		return ncclWorld(getenv)
	case "mpi":
		if mpi {
			if mpiSize == 1 {
				return alone, nil
			}
			return World{Backend: "mpi", Size: mpiSize, Rank: mpiRank, Source: "mpirun"}, nil
		}
		return World{Backend: "mpi", Source: "distributed: mpi"}, nil
	}
	return alone, fmt.Errorf("distributed %q: want ring, nccl, mpi, any or empty", distributed)
}

// missingNCCL lists the variables of MLX's NCCL backend that are not set.
func missingNCCL(getenv func(string) string) []string {
	var missing []string
	for _, v := range ncclVars {
		if getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	return missing
}

// ncclMissingError names the NCCL variables that are not set, after what (a prefix).
func ncclMissingError(what string, missing []string) error {
	unset := "none of them is set"
	switch {
	case len(missing) == 1:
		unset = missing[0] + " is not set"
	case len(missing) < len(ncclVars):
		unset = strings.Join(missing[:len(missing)-1], ", ") + " and " + missing[len(missing)-1] + " are not set"
	}
	return fmt.Errorf("%s MLX's NCCL backend needs MLX_RANK, MLX_WORLD_SIZE, NCCL_HOST_IP and NCCL_PORT in the environment, and %s (train --launch N or mlx.launch --backend nccl set them; see README)", what, unset)
}

// ncclWorld reads the NCCL group that MLX_RANK, MLX_WORLD_SIZE, NCCL_HOST_IP and
// NCCL_PORT describe, all of them set. A world size of 1 is a group of one.
func ncclWorld(getenv func(string) string) (World, error) {
	sizeVar, rankVar := getenv("MLX_WORLD_SIZE"), getenv("MLX_RANK")
	host, port := getenv("NCCL_HOST_IP"), getenv("NCCL_PORT")
	size, err := strconv.Atoi(sizeVar)
	if err != nil || size < 1 {
		return World{}, fmt.Errorf("MLX_WORLD_SIZE %q: want the number of ranks, at least 1", sizeVar)
	}
	rank, err := strconv.Atoi(rankVar)
	if err != nil || rank < 0 || rank >= size {
		return World{}, fmt.Errorf("MLX_RANK %q: want a rank in 0..%d, the ranks of MLX_WORLD_SIZE %d", rankVar, size-1, size)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return World{}, fmt.Errorf("NCCL_PORT %q: want the port rank 0 listens on for NCCL's id, 1 to 65535", port)
	}
	if strings.ContainsAny(host, ":/ \t") {
		// MLX splits tcp://host:port at the first colon and connects over IPv4.
		return World{}, fmt.Errorf("NCCL_HOST_IP %q: want rank 0's IPv4 address or host name (MLX's NCCL bootstrap is IPv4)", host)
	}
	if size == 1 {
		return World{Size: 1}, nil
	}
	coord := net.JoinHostPort(host, port)
	return World{Backend: "nccl", Size: size, Rank: rank, Coordinator: coord,
		Source: "MLX_WORLD_SIZE and NCCL_HOST_IP:NCCL_PORT " + coord}, nil
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

// LocalIPv4 is the IPv4 address of this machine's interface that reaches addr
// ("host:port"), as the routing table picks it: a UDP socket is connected to addr and
// nothing is sent.
func LocalIPv4(addr string) (netip.Addr, error) {
	c, err := net.Dial("udp4", addr)
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// HostOf is the host part of "ip:port".
func HostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
