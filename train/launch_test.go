package train

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDetectLaunch(t *testing.T) {
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
		want        launch
		err         string
	}{
		{"nothing: alone", "", nil, launch{size: 1}, ""},
		{"ring, lists of addresses", "", map[string]string{"MLX_RANK": "1", "MLX_HOSTFILE": lists},
			launch{backend: "ring", size: 2, rank: 1, addrs: []string{"10.0.0.1:5000", "10.0.0.2:5000"}, source: "MLX_HOSTFILE " + lists}, ""},
		{"ring, one address per rank", "any", map[string]string{"MLX_RANK": "2", "MLX_HOSTFILE": strs},
			launch{backend: "ring", size: 3, rank: 2, addrs: []string{"127.0.0.1:4000", "127.0.0.1:4001", "127.0.0.1:4002"}, source: "MLX_HOSTFILE " + strs}, ""},
		{"empty hostfile: alone", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": empty}, launch{size: 1}, ""},
		{"hostfile of one: alone", "ring", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": one}, launch{size: 1}, ""},
		{"mpirun (Open MPI)", "", map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3"}, launch{backend: "mpi", size: 4, rank: 3, source: "mpirun"}, ""},
		{"mpirun (MPICH)", "mpi", map[string]string{"PMI_SIZE": "2", "PMI_RANK": "1"}, launch{backend: "mpi", size: 2, rank: 1, source: "mpirun"}, ""},
		{"mpi without mpirun: MLX decides", "mpi", nil, launch{backend: "mpi", source: "distributed: mpi"}, ""},
		{"any without a launcher: MLX decides", "any", nil, launch{backend: "any", source: "distributed: any"}, ""},
		{"ring without the variables", "ring", nil, launch{}, "distributed: ring needs MLX_RANK and MLX_HOSTFILE"},
		{"rank outside the hostfile", "", map[string]string{"MLX_RANK": "2", "MLX_HOSTFILE": lists}, launch{}, `MLX_RANK "2": want a rank in 0..1`},
		{"rank not a number", "", map[string]string{"MLX_RANK": "one", "MLX_HOSTFILE": lists}, launch{}, `MLX_RANK "one"`},
		{"missing hostfile", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": filepath.Join(dir, "none.json")}, launch{}, "none.json"},
		{"hostfile not JSON", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("bad.json", "10.0.0.1:5000\n")}, launch{}, "want a JSON list"},
		{"hostfile with no ranks", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("none-in.json", "[]")}, launch{}, "no ranks"},
		{"entry without a port", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("noport.json", `["10.0.0.1", "10.0.0.2:5000"]`)}, launch{}, `rank 0: "10.0.0.1" is not ip:port`},
		{"entry of the wrong type", "", map[string]string{"MLX_RANK": "0", "MLX_HOSTFILE": file("num.json", `[5000, 5001]`)}, launch{}, "rank 0: 5000 is neither"},
		{"bad config value", "nccl", nil, launch{}, `distributed "nccl"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := detectLaunch(tc.distributed, func(k string) string { return tc.env[k] })
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

// TestGoEngineRefusesRanks: started as one of two ranks, a run on the go engine stops
// before loading anything and says to build with -tags mlx.
func TestGoEngineRefusesRanks(t *testing.T) {
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts.json")
	if err := os.WriteFile(hosts, []byte(`[["127.0.0.1:4000"], ["127.0.0.1:4001"]]`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MLX_RANK", "0")
	t.Setenv("MLX_HOSTFILE", hosts)
	cfg := tinyConfig(filepath.Join(dir, "no-model"), filepath.Join(dir, "no-data"), filepath.Join(dir, "out"))
	_, err := Run(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "needs the mlx engine") || !strings.Contains(err.Error(), "-tags mlx") || !strings.Contains(err.Error(), "2 ranks") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("adapter_path was created: %v", err)
	}
	// distributed: ring with the go engine, alone but asked for a ring: refused too.
	t.Setenv("MLX_RANK", "")
	cfg.Distributed = "ring"
	if _, err := Run(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "MLX_RANK and MLX_HOSTFILE") {
		t.Fatalf("distributed: ring alone: err = %v", err)
	}
}
