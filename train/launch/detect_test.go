package launch

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lists := file("lists.json", `[["10.0.0.1:5000", "10.0.1.1:5001"], ["10.0.0.2:5000", "10.0.1.2:5001"]]`)
	strs := file("strings.json", `["127.0.0.1:4000", "127.0.0.1:4001", "127.0.0.1:4002"]`)
	empty := file("empty.json", "\n") // mlx.launch's hostfile for a single host
	one := file("one.json", `[["127.0.0.1:4000"]]`)
	nccl := map[string]string{"MLX_RANK": "1", "MLX_WORLD_SIZE": "2", "NCCL_HOST_IP": "127.0.0.1", "NCCL_PORT": "5000"}
	ncclWorld2 := World{Backend: "nccl", Size: 2, Rank: 1, Coordinator: "127.0.0.1:5000", Source: "MLX_WORLD_SIZE and NCCL_HOST_IP:NCCL_PORT 127.0.0.1:5000"}
	ring := map[string]string{"MLX_RANK": "1", "MLX_HOSTFILE": lists}
	ringWorld2 := World{Backend: "ring", Size: 2, Rank: 1, Addrs: []string{"10.0.0.1:5000", "10.0.0.2:5000"}, Source: "MLX_HOSTFILE " + lists}
	mpirun := map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}
	cases := []struct {
		name        string
		distributed string
		env         map[string]string
		want        World
		err         string
		// nccl answers whether the build has MLX's NCCL backend: "yes", "no", or "" when
		// Detect must not need to ask.
		nccl string
	}{
		{"nothing: alone", "", nil, World{Size: 1}, "", ""},
		{"ring, lists of addresses", "", map[string]string{"MLX_RANK": "1", "MLX_HOSTFILE": lists},
			World{Backend: "ring", Size: 2, Rank: 1, Addrs: []string{"10.0.0.1:5000", "10.0.0.2:5000"}, Source: "MLX_HOSTFILE " + lists}, "", ""},
		{"ring, one address per rank", "any", map[string]string{"MLX_RANK": "2", "MLX_HOSTFILE": strs},
			World{Backend: "ring", Size: 3, Rank: 2, Addrs: []string{"127.0.0.1:4000", "127.0.0.1:4001", "127.0.0.1:4002"}, Source: "MLX_HOSTFILE " + strs}, "", ""},
		{"empty hostfile: alone", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": empty}, World{Size: 1}, "", ""},
		{"hostfile of one: alone", "ring", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": one}, World{Size: 1}, "", ""},
		{"mpirun (Open MPI)", "", map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3"}, World{Backend: "mpi", Size: 4, Rank: 3, Source: "mpirun"}, "", ""},
		{"mpirun (MPICH)", "mpi", map[string]string{"PMI_SIZE": "2", "PMI_RANK": "1"}, World{Backend: "mpi", Size: 2, Rank: 1, Source: "mpirun"}, "", ""},
		{"mpi without mpirun: MLX decides", "mpi", nil, World{Backend: "mpi", Source: "distributed: mpi"}, "", ""},
		{"any without a launcher: MLX decides", "any", nil, World{Backend: "any", Source: "distributed: any"}, "", ""},
		{"ring without the variables", "ring", nil, World{}, "distributed: ring needs MLX_RANK and MLX_HOSTFILE", ""},
		{"rank outside the hostfile", "", map[string]string{"MLX_RANK": "2", "MLX_HOSTFILE": lists}, World{}, `MLX_RANK "2": want a rank in 0..1`, ""},
		{"rank not a number", "", map[string]string{"MLX_RANK": "one", "MLX_HOSTFILE": lists}, World{}, `MLX_RANK "one"`, ""},
		{"missing hostfile", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": filepath.Join(dir, "none.json")}, World{}, "none.json", ""},
		{"hostfile not JSON", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("bad.json", "10.0.0.1:5000\n")}, World{}, "want a JSON list", ""},
		{"hostfile with no ranks", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("none-in.json", "[]")}, World{}, "no ranks", ""},
		{"entry without a port", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("noport.json", `["10.0.0.1", "10.0.0.2:5000"]`)}, World{}, `rank 0: "10.0.0.1" is not ip:port`, ""},
		{"entry of the wrong type", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("num.json", `[5000, 5001]`)}, World{}, "rank 0: 5000 is neither", ""},
		{"bad config value", "jaccl", nil, World{}, `distributed "jaccl": want ring, nccl, mpi, any or empty`, ""},

		// NCCL, from the variables mlx.launch --backend nccl sets.
		{"nccl", "nccl", nccl, ncclWorld2, "", ""},
		{"nccl described alone, empty distributed", "", nccl, ncclWorld2, "", ""},
		{"nccl described alone, any, a build without NCCL: still nccl (joining says so)", "any", nccl, ncclWorld2, "", ""},
		{"nccl and ring described, NCCL build: NCCL first, as MLX's any", "", with(nccl, ring), ncclWorld2, "", "yes"},
		{"nccl and ring described, no NCCL: the ring", "any", with(nccl, ring), ringWorld2, "", "no"},
		{"nccl and ring described, distributed ring", "ring", with(nccl, ring), ringWorld2, "", ""},
		{"nccl and mpirun, NCCL build", "", with(nccl, mpirun), ncclWorld2, "", "yes"},
		{"nccl and mpirun, no NCCL", "", with(nccl, mpirun), World{Backend: "mpi", Size: 2, Rank: 1, Source: "mpirun"}, "", "no"},
		{"nccl of one: alone", "nccl", with(nccl, map[string]string{"MLX_RANK": "0", "MLX_WORLD_SIZE": "1"}), World{Size: 1}, "", ""},
		{"nccl with a host name", "nccl", with(nccl, map[string]string{"NCCL_HOST_IP": "gpu-0.local"}),
			World{Backend: "nccl", Size: 2, Rank: 1, Coordinator: "gpu-0.local:5000", Source: "MLX_WORLD_SIZE and NCCL_HOST_IP:NCCL_PORT gpu-0.local:5000"}, "", ""},
		{"nccl without any variable", "nccl", nil, World{}, "distributed: nccl: MLX's NCCL backend needs MLX_RANK, MLX_WORLD_SIZE, NCCL_HOST_IP and NCCL_PORT in the environment, and none of them is set (train --launch N or mlx.launch --backend nccl set them", ""},
		{"nccl with the ring's variables", "nccl", ring, World{}, "and MLX_WORLD_SIZE, NCCL_HOST_IP and NCCL_PORT are not set", ""},
		{"nccl without its port", "nccl", without(nccl, "NCCL_PORT"), World{}, "and NCCL_PORT is not set", ""},
		{"a world size without the rest", "", map[string]string{"MLX_RANK": "0", "MLX_WORLD_SIZE": "2"}, World{},
			"MLX_WORLD_SIZE is set, but MLX's NCCL backend needs MLX_RANK, MLX_WORLD_SIZE, NCCL_HOST_IP and NCCL_PORT in the environment, and NCCL_HOST_IP and NCCL_PORT are not set", ""},
		{"nccl rank outside the world", "nccl", with(nccl, map[string]string{"MLX_RANK": "2"}), World{}, `MLX_RANK "2": want a rank in 0..1, the ranks of MLX_WORLD_SIZE 2`, ""},
		{"nccl rank negative", "", with(nccl, map[string]string{"MLX_RANK": "-1"}), World{}, `MLX_RANK "-1"`, ""},
		{"world size not a number", "nccl", with(nccl, map[string]string{"MLX_WORLD_SIZE": "two"}), World{}, `MLX_WORLD_SIZE "two": want the number of ranks`, ""},
		{"world size 0", "nccl", with(nccl, map[string]string{"MLX_WORLD_SIZE": "0"}), World{}, `MLX_WORLD_SIZE "0"`, ""},
		{"port out of range", "nccl", with(nccl, map[string]string{"NCCL_PORT": "70000"}), World{}, `NCCL_PORT "70000": want the port rank 0 listens on`, ""},
		{"port not a number", "", with(nccl, map[string]string{"NCCL_PORT": "http"}), World{}, `NCCL_PORT "http"`, ""},
		{"IPv6 coordinator", "nccl", with(nccl, map[string]string{"NCCL_HOST_IP": "::1"}), World{}, `NCCL_HOST_IP "::1": want rank 0's IPv4 address or host name`, ""},
		{"coordinator with a port", "nccl", with(nccl, map[string]string{"NCCL_HOST_IP": "10.0.0.1:5000"}), World{}, `NCCL_HOST_IP "10.0.0.1:5000"`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hasNCCL := func() bool {
				if tc.nccl == "" {
					t.Errorf("Detect asked whether the build has NCCL")
				}
				return tc.nccl == "yes"
			}
			got, err := Detect(tc.distributed, func(k string) string { return tc.env[k] }, hasNCCL)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// with is env with the variables of more set as well (more's win).
func with(env map[string]string, more ...map[string]string) map[string]string {
	out := maps.Clone(env)
	for _, m := range more {
		maps.Copy(out, m)
	}
	return out
}

// without is env less the named variables.
func without(env map[string]string, names ...string) map[string]string {
	out := maps.Clone(env)
	for _, n := range names {
		delete(out, n)
	}
	return out
}
