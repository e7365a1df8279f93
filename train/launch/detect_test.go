package launch

import (
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
	cases := []struct {
		name        string
		distributed string
		env         map[string]string
		want        World
		err         string
	}{
		{"nothing: alone", "", nil, World{Size: 1}, ""},
		{"ring, lists of addresses", "", map[string]string{"MLX_RANK": "1", "MLX_HOSTFILE": lists},
			World{Backend: "ring", Size: 2, Rank: 1, Addrs: []string{"10.0.0.1:5000", "10.0.0.2:5000"}, Source: "MLX_HOSTFILE " + lists}, ""},
		{"ring, one address per rank", "any", map[string]string{"MLX_RANK": "2", "MLX_HOSTFILE": strs},
			World{Backend: "ring", Size: 3, Rank: 2, Addrs: []string{"127.0.0.1:4000", "127.0.0.1:4001", "127.0.0.1:4002"}, Source: "MLX_HOSTFILE " + strs}, ""},
		{"empty hostfile: alone", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": empty}, World{Size: 1}, ""},
		{"hostfile of one: alone", "ring", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": one}, World{Size: 1}, ""},
		{"mpirun (Open MPI)", "", map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3"}, World{Backend: "mpi", Size: 4, Rank: 3, Source: "mpirun"}, ""},
		{"mpirun (MPICH)", "mpi", map[string]string{"PMI_SIZE": "2", "PMI_RANK": "1"}, World{Backend: "mpi", Size: 2, Rank: 1, Source: "mpirun"}, ""},
		{"mpi without mpirun: MLX decides", "mpi", nil, World{Backend: "mpi", Source: "distributed: mpi"}, ""},
		{"any without a launcher: MLX decides", "any", nil, World{Backend: "any", Source: "distributed: any"}, ""},
		{"ring without the variables", "ring", nil, World{}, "distributed: ring needs MLX_RANK and MLX_HOSTFILE"},
		{"rank outside the hostfile", "", map[string]string{"MLX_RANK": "2", "MLX_HOSTFILE": lists}, World{}, `MLX_RANK "2": want a rank in 0..1`},
		{"rank not a number", "", map[string]string{"MLX_RANK": "one", "MLX_HOSTFILE": lists}, World{}, `MLX_RANK "one"`},
		{"missing hostfile", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": filepath.Join(dir, "none.json")}, World{}, "none.json"},
		{"hostfile not JSON", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("bad.json", "10.0.0.1:5000\n")}, World{}, "want a JSON list"},
		{"hostfile with no ranks", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("none-in.json", "[]")}, World{}, "no ranks"},
		{"entry without a port", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("noport.json", `["10.0.0.1", "10.0.0.2:5000"]`)}, World{}, `rank 0: "10.0.0.1" is not ip:port`},
		{"entry of the wrong type", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("num.json", `[5000, 5001]`)}, World{}, "rank 0: 5000 is neither"},
		{"bad config value", "nccl", nil, World{}, `distributed "nccl"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.distributed, func(k string) string { return tc.env[k] })
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
