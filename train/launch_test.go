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

	// NCCL's variables, as mlx.launch --backend nccl sets them: refused the same way.
	cfg.Distributed = ""
	t.Setenv("MLX_HOSTFILE", "")
	for k, v := range map[string]string{"MLX_RANK": "1", "MLX_WORLD_SIZE": "2", "NCCL_HOST_IP": "127.0.0.1", "NCCL_PORT": "5000"} {
		t.Setenv(k, v)
	}
	if _, err := Run(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "distributed training (2 ranks, from MLX_WORLD_SIZE and NCCL_HOST_IP:NCCL_PORT 127.0.0.1:5000) needs the mlx engine") {
		t.Fatalf("NCCL's variables: err = %v", err)
	}
	// distributed: nccl without NCCL's port: named.
	t.Setenv("NCCL_PORT", "")
	cfg.Distributed = "nccl"
	if _, err := Run(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "distributed: nccl: MLX's NCCL backend needs MLX_RANK, MLX_WORLD_SIZE, NCCL_HOST_IP and NCCL_PORT in the environment, and NCCL_PORT is not set") {
		t.Fatalf("distributed: nccl without NCCL_PORT: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("adapter_path was created: %v", err)
	}
}
