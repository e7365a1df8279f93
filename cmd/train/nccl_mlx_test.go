//go:build mlx

package main

import (
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestNCCLNotInThisBuild: with an MLX built without NCCL (its CPU and Metal builds), a
// rank started for NCCL — the variables mlx.launch --backend nccl sets, and distributed:
// nccl, any or empty — stops before loading anything with one line that says the build
// has no NCCL backend and what to do instead.
func TestNCCLNotInThisBuild(t *testing.T) {
	e, err := mx.Open("mlx")
	if err != nil {
		t.Fatal(err)
	}
	if mx.HasBackend(e, "nccl") {
		t.Skip("this MLX build has NCCL")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	for k, v := range map[string]string{"MLX_RANK": "0", "MLX_WORLD_SIZE": "2", "NCCL_HOST_IP": "127.0.0.1", "NCCL_PORT": port} {
		t.Setenv(k, v)
	}
	f := newFixture(t)
	cfg := f.config(t, "")
	want := "train: distributed: nccl (2 ranks, from MLX_WORLD_SIZE and NCCL_HOST_IP:NCCL_PORT 127.0.0.1:" + port + "): this MLX build has no NCCL backend, " +
		"which MLX has only when built with CUDA and NCCL (see README, Distributed training); without GPUs use distributed: ring\n"
	for _, distributed := range [][]string{{"--distributed", "nccl"}, {"--distributed", "any"}, nil} {
		code, stdout, stderr := runMain(append([]string{"--config", cfg, "--backend", "mlx"}, distributed...)...)
		if code != 1 || stdout != "" || stderr != want {
			t.Errorf("%v: exit %d, stdout %q, stderr\n%q\nwant\n%q", distributed, code, stdout, stderr, want)
		}
	}
	if _, err := os.Stat(f.adapters); !os.IsNotExist(err) {
		t.Errorf("adapter_path exists: %v", err)
	}
}
