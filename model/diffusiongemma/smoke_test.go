package diffusiongemma

import (
	"math"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestSmokeForward runs the whole tiny model (unquantized, 4-bit and mixed) on one
// prompt and canvas and checks Forward's contract: logits f32 [1, L, V], finite, inside
// the softcap, varying over the vocabulary; the canvas is read bidirectionally (changing
// its last token changes the first position's logits); and a quantized model, made from
// the same draws as the unquantized one, ranks tokens nearly as the unquantized one does.
func TestSmokeForward(t *testing.T) {
	e := mxtest.Go(t)
	promptIDs := []int32{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12}
	canvasIDs := []int32{5, 9, 300, 4, 1, 1}
	prompt := mx.FromInt32(e, promptIDs, 1, len(promptIDs))
	var dense []float32
	for _, bits := range []string{BitsNone, Bits4, BitsMixed} {
		m, _ := synthModel(t, e, PresetTiny, bits, 1)
		cfg := m.Config
		vocab, capv := cfg.TextConfig.VocabSize, float32(cfg.TextConfig.FinalLogitSoftcapping)
		logits := m.Forward(prompt, mx.FromInt32(e, canvasIDs, 1, len(canvasIDs)))
		if s := logits.Shape(); !slices.Equal(s, []int{1, len(canvasIDs), vocab}) || logits.DType() != mx.Float32 {
			t.Fatalf("bits %s: logits %v %s, want [1 %d %d] float32", bits, s, logits.DType(), len(canvasIDs), vocab)
		}
		v := logits.Float32s()
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || x <= -capv || x >= capv {
				t.Fatalf("bits %s: logit %d = %v, want finite and inside ±%g", bits, i, x, capv)
			}
		}
		for p := range canvasIDs {
			row := v[p*vocab : (p+1)*vocab]
			if slices.Min(row) == slices.Max(row) {
				t.Errorf("bits %s: position %d has constant logits %v", bits, p, row[0])
			}
		}
		changed := slices.Clone(canvasIDs)
		changed[len(changed)-1] = 77
		other := m.Forward(prompt, mx.FromInt32(e, changed, 1, len(changed))).Float32s()
		if slices.Equal(other[:vocab], v[:vocab]) {
			t.Errorf("bits %s: the first canvas position does not see the last canvas token", bits)
		}
		if bits == BitsNone {
			dense = v
			continue
		}
		if r := correlation(v, dense); r < 0.8 {
			t.Errorf("bits %s: logits correlate %.3f with the unquantized model's, want ≥ 0.8 (a wrong bit layout gives about 0)", bits, r)
		} else {
			t.Logf("bits %s: correlation with the unquantized logits %.4f", bits, r)
		}
	}
}

func correlation(a, b []float32) float64 {
	var ma, mb float64
	for i := range a {
		ma += float64(a[i])
		mb += float64(b[i])
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		x, y := float64(a[i])-ma, float64(b[i])-mb
		sab += x * y
		saa += x * x
		sbb += y * y
	}
	return sab / math.Sqrt(saa*sbb)
}
