package train

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestGradCheckpoint: a run with grad_checkpoint recomputes every layer in the
// backward pass but must train the same adapter (dropout on, so the recomputation has
// to replay the masks): the losses agree to float32 summation-order noise.
func TestGradCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Iters = 3
	cfg.SaveEvery = 0
	cfg.LoRAParameters.Dropout = 0.3
	cfg.AdapterPath = filepath.Join(dir, "plain")
	want, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ck := cfg
	ck.GradCheckpoint = true
	ck.AdapterPath = filepath.Join(dir, "checkpointed")
	got, err := Run(context.Background(), ck, Options{})
	if err != nil {
		t.Fatal(err)
	}
	close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5*(1+math.Abs(b)) }
	if got.FinalValLoss == nil || want.FinalValLoss == nil {
		t.Fatalf("no validation loss: %+v, %+v", got, want)
	}
	if !close(got.FinalLoss, want.FinalLoss) || !close(*got.FinalValLoss, *want.FinalValLoss) {
		t.Errorf("checkpointed run: train %v val %v, want %v and %v", got.FinalLoss, *got.FinalValLoss, want.FinalLoss, *want.FinalValLoss)
	}
}

func TestGradCheckpointFullRejected(t *testing.T) {
	cfg := resumeConfig(t, t.TempDir())
	cfg.FineTuneType = "full"
	cfg.GradCheckpoint = true
	_, err := Run(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "grad_checkpoint needs fine_tune_type lora") {
		t.Errorf("error %v, want one naming grad_checkpoint and lora", err)
	}
}
