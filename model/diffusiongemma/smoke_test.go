package diffusiongemma

import (
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func TestSmokeForward(t *testing.T) {
	e := mxtest.Go(t)
	for _, bits := range []string{"0", "4", "mixed"} {
		cfg, err := Preset("tiny")
		if err != nil {
			t.Fatal(err)
		}
		w, err := Synthesize(e, cfg, 1, bits)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Build(e, cfg, w, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		prompt := mx.FromInt32(e, []int32{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12}, 1, 11)
		canvas := mx.FromInt32(e, []int32{5, 9, 300, 4, 1, 1}, 1, 6)
		logits := m.Forward(prompt, canvas)
		v := logits.Float32s()
		t.Logf("bits %s: logits %v first %v", bits, logits.Shape(), v[:4])
	}
}
