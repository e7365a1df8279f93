package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestRankArgs: the ranks get every flag the launcher got, slices re-joined, without
// --launch and with the launch's backend.
func TestRankArgs(t *testing.T) {
	cmd := newCommand()
	if err := cmd.Flags().Parse([]string{"--config", "x.yaml", "--iters", "3", "--launch", "2", "--distributed", "ring",
		"--lora-parameters.keys", "self_attn.q_proj,mlp.down_proj", "--eval.noise-levels", "0.25,0.5", "--resume"}); err != nil {
		t.Fatal(err)
	}
	got := rankArgs(cmd.Flags(), "ring")
	want := []string{"--config=x.yaml", "--eval.noise-levels=0.250000,0.500000", "--iters=3",
		"--lora-parameters.keys=self_attn.q_proj,mlp.down_proj", "--resume=true", "--distributed=ring"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// What the ranks get parses back to what the launcher got.
	again := newCommand()
	if err := again.Flags().Parse(got); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config", "iters", "lora-parameters.keys", "eval.noise-levels", "resume", "distributed"} {
		if a, b := again.Flags().Lookup(name).Value.String(), cmd.Flags().Lookup(name).Value.String(); a != b {
			t.Errorf("--%s: %q after the round trip, %q before", name, a, b)
		}
	}
}

func TestLaunchRefusals(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(t, "")
	for _, v := range []string{"MLX_RANK", "MLX_HOSTFILE", "MLX_WORLD_SIZE"} {
		t.Run("inside a rank: "+v, func(t *testing.T) {
			t.Setenv(v, "0")
			code, _, stderr := runMain("--config", cfg, "--launch", "2")
			if code != 1 || !strings.Contains(stderr, "--launch starts ranks of its own") {
				t.Errorf("exit %d: %s", code, stderr)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		env  string // DGTUNE_DISTRIBUTED
		want string
	}{
		{[]string{"--launch", "-1"}, "", "train: --launch -1: want a number of ranks\n"},
		{[]string{"--launch", "2", "--distributed", "mpi"}, "", "train: --launch starts ring or NCCL ranks, not distributed: mpi (start MPI ranks with mpirun)\n"},
		// distributed from the config's other sources counts too.
		{[]string{"--launch", "2"}, "mpi", "train: --launch starts ring or NCCL ranks, not distributed: mpi (start MPI ranks with mpirun)\n"},
		{[]string{"--launch", "2", "--distributed", "nccl"}, "", "train: --launch 2 over NCCL needs a GPU for each rank (NCCL cannot put two ranks on one), and CUDA_VISIBLE_DEVICES=0 lists 1\n"},
	} {
		t.Setenv("DGTUNE_DISTRIBUTED", tc.env)
		t.Setenv("CUDA_VISIBLE_DEVICES", "0")
		code, _, stderr := runMain(append([]string{"--config", cfg}, tc.args...)...)
		if code != 1 || stderr != tc.want {
			t.Errorf("%v (DGTUNE_DISTRIBUTED=%s): exit %d: %q, want %q", tc.args, tc.env, code, stderr, tc.want)
		}
	}
}

// TestLaunchBackend: the config's distributed picks the launch's backend: ring and
// nccl as named, empty and any as any (each rank then takes NCCL on a CUDA build with a
// GPU of its own, as MLX's any would), mpi refused.
func TestLaunchBackend(t *testing.T) {
	for _, tc := range []struct{ distributed, want string }{
		{"", "any"}, {"any", "any"}, {"ring", "ring"}, {"nccl", "nccl"}, {"mpi", ""},
	} {
		got, err := launchBackend(tc.distributed)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("launchBackend(%q) = %q, %v; want %q", tc.distributed, got, err, tc.want)
		}
	}
}

// TestLaunchGoEngine runs the built command with --launch 2 on the go engine: both
// ranks refuse (the go engine cannot join a group), each saying to build with
// -tags mlx, and the launcher exits non-zero without anything written.
func TestLaunchGoEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it as child processes")
	}
	bin := buildTrain(t)
	f := newFixture(t)
	cmd := exec.Command(bin, "--config", f.config(t, ""), "--launch", "2", "--batch-size", "2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"\ntrain: distributed training (2 ranks, from MLX_HOSTFILE ",
		"\n[rank 1] train: distributed training (2 ranks, from MLX_HOSTFILE ",
		"needs the mlx engine, and this run's engine is go: build with -tags mlx",
		"train: --launch: rank ",
	} {
		if !strings.Contains("\n"+stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if _, err := os.Stat(f.adapters); !os.IsNotExist(err) {
		t.Errorf("adapter_path exists: %v", err)
	}
}
