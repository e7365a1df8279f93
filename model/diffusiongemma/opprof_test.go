package diffusiongemma_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx/goeng"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestOpProfile prints where one LoRA training step's wall time goes on the go engine,
// op by op, and how much of it runs on a single goroutine (goeng.OpProfile). It is a
// measurement, not a check, and runs only when GOENG_OPPROF is set to
// "preset[,bits[,prompt,canvas[,steps[,grad_checkpoint]]]]" (preset may be a checkpoint
// directory, such as a 2-layer real geometry from `probe mkmodel --preset real --layers 2
// --bits 4 --sharded`), for example
//
//	GOENG_OPPROF=bench,4,128,256,3 GOMAXPROCS=16 go test ./model/diffusiongemma -run TestOpProfile -v
//
// bits is 4 or 0 (unquantized); the defaults are 4 bits, 64/64, 3 steps after one warm-up.
//
// Prefer a checkpoint directory (`probe mkmodel --preset bench --bits 0 --seed 1 --out DIR`)
// to a preset name: a preset's weights are drawn into the Go heap, where on the development
// VM the step ran 1.3–2× slower than on the same weights loaded from disk, as `probe bench`
// runs them (bench, f32, 2 threads: 404–626 against 273–285 ms a step, with twice the page
// faults; session 25).
func TestOpProfile(t *testing.T) {
	spec := os.Getenv("GOENG_OPPROF")
	if spec == "" {
		t.Skip("set GOENG_OPPROF=preset[,bits[,prompt,canvas[,steps[,grad_checkpoint]]]] to profile a training step")
	}
	f := strings.Split(spec, ",")
	arg := func(i, def int) int {
		if i >= len(f) {
			return def
		}
		n, err := strconv.Atoi(f[i])
		if err != nil {
			t.Fatalf("GOENG_OPPROF field %d: %v", i, err)
		}
		return n
	}
	bits := dg.Bits4
	if arg(1, 4) == 0 {
		bits = dg.BitsNone
	}
	prompt, canvas, steps := arg(2, 64), arg(3, 64), arg(4, 3)
	var step *trainStep
	if strings.Contains(f[0], "/") { // a checkpoint directory (bits is then the checkpoint's)
		e := mxtest.Go(t)
		m, err := dg.Load(e, f[0], dg.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		step = newTrainStepM(t, e, m, prompt, canvas)
	} else {
		step = newTrainStep(t, f[0], bits, prompt, canvas)
	}
	step.m.GradCheckpoint = arg(5, 0) != 0
	step.run(t, 0) // warm-up
	p := goeng.StartOpProfile()
	for i := 1; i <= steps; i++ {
		step.run(t, i)
	}
	p.Stop()
	var b strings.Builder
	p.WriteReport(&b, steps)
	t.Log("\n" + b.String())
}
