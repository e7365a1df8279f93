//go:build mlx

package engines_test

import (
	"math"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/engines"
	"github.com/dgtune/dgtune/objective"
)

// TestDrawsMatchMLX: the MLX engine's draws go to the go engine following its release,
// and a training step's corruption drawn there is MLX's, bit for bit, at several noise
// levels and for the objective's choices.
func TestDrawsMatchMLX(t *testing.T) {
	e, err := mx.Open("mlx")
	if err != nil {
		t.Fatal(err)
	}
	d := engines.Draws(e)
	if d.Name() != "go" {
		t.Fatalf("Draws(mlx) is the %s engine, want go", d.Name())
	}
	target := make([]int32, 300)
	for i := range target {
		target[i] = int32(i * 7 % 1000)
	}
	obj := objective.Reference(0.05, 0.95)
	for seed := uint64(0); seed < 20; seed++ {
		want := obj.Draw(mx.Key(e, seed), target, 262144)
		got := obj.Draw(mx.Key(d, seed), target, 262144)
		if math.Float64bits(got.T) != math.Float64bits(want.T) || !slices.Equal(got.Canvas, want.Canvas) ||
			!slices.Equal(got.Corrupt, want.Corrupt) {
			t.Fatalf("seed %d: the go engine's draw (t=%v) differs from MLX's (t=%v)", seed, got.T, want.T)
		}
		if gc, wc := obj.Coin(mx.Key(d, seed)), obj.Coin(mx.Key(e, seed)); gc != wc {
			t.Fatalf("seed %d: coin %v, MLX %v", seed, gc, wc)
		}
	}
}
