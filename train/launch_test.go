package train

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
