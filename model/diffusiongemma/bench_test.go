package diffusiongemma

import (
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// Benchmarks on the small preset (hidden 256, 6 layers, 16 experts top-4, vocab 4096)
// quantized to 4 bits, with a 32-token prompt and a 128-token canvas.
const (
	benchPrompt = 32
	benchCanvas = 128
)

func benchSetup(b *testing.B) (m *Model, prompt, canvas *mx.Array) {
	e := mxtest.Go(b)
	m, _ = synthModel(b, e, PresetSmall, Bits4, 1)
	rng := rand.New(rand.NewPCG(2, 3))
	vocab := m.Config.TextConfig.VocabSize
	return m, randomIDs(e, rng, vocab, benchPrompt), randomIDs(e, rng, vocab, benchCanvas)
}

// BenchmarkDecodeSmall4Bit is one denoising step: a decoder pass over the canvas against
// an encoded prompt.
func BenchmarkDecodeSmall4Bit(b *testing.B) {
	m, prompt, canvas := benchSetup(b)
	c := m.NewCache()
	m.Encode(prompt, c)
	for b.Loop() {
		mx.Tidy(m.Engine, func() []*mx.Array {
			mx.Eval(m.Decode(canvas, c, nil))
			return nil
		})
	}
}

// BenchmarkForwardSmall4Bit is the training call: encoder over the prompt, then the decoder.
func BenchmarkForwardSmall4Bit(b *testing.B) {
	m, prompt, canvas := benchSetup(b)
	for b.Loop() {
		mx.Tidy(m.Engine, func() []*mx.Array {
			mx.Eval(m.Forward(prompt, canvas))
			return nil
		})
	}
}
