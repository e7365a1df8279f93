package main

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/objective"
)

// softEmbedding64 is softmax(ℓ)·E·√H for every row of logits [rows·V], in float64.
func softEmbedding64(m *dg.Model, logits []float32) []float32 {
	v, h := m.Config.TextConfig.VocabSize, m.Config.TextConfig.HiddenSize
	emb := m.Embed.Dense.Float32s()
	scale := math.Sqrt(float64(h))
	out := make([]float32, len(logits)/v*h)
	for r := range len(logits) / v {
		row := logits[r*v : (r+1)*v]
		top := math.Inf(-1)
		for _, x := range row {
			top = math.Max(top, float64(x))
		}
		p, z := make([]float64, v), 0.0
		for i, x := range row {
			p[i] = math.Exp(float64(x) - top)
			z += p[i]
		}
		for j := range h {
			s := 0.0
			for i := range v {
				s += p[i] / z * float64(emb[i*h+j])
			}
			out[r*h+j] = float32(s * scale)
		}
	}
	return out
}

func ce64(row []float32, target int32) float64 {
	top := math.Inf(-1)
	for _, x := range row {
		top = math.Max(top, float64(x))
	}
	s := 0.0
	for _, x := range row {
		s += math.Exp(float64(x) - top)
	}
	return top + math.Log(s) - float64(row[target])
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// The --self-cond contract: `logits` is a second decoder pass conditioned on the first
// pass's logits; `loss` and `grad.K` are the second pass's with the first held constant.
// Here the second pass is written by hand: the first pass's logits, their soft embedding
// in float64, the decoder run again; the gradient is that of a loss whose first pass is
// computed once, outside the differentiated function.
func TestForwardSelfCond(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	mustProbe(t, "mkmodel", "--preset", "tiny", "--seed", "6", "--out", dir)
	m, err := dg.Load(e, dir, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.Attach(m, lora.Config{Rank: 2, Scale: 4}, 9)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	p := a.Params()
	for _, n := range a.Names() { // a fixed order: the draws must not depend on map iteration
		if strings.HasSuffix(n, ".lora_b") {
			p[n] = mx.MulScalar(mxtest.RandN(e, rng, p[n].Shape()...), 0.05)
		}
	}
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
	adir := t.TempDir()
	if err := lora.Save(adir, a, nil); err != nil {
		t.Fatal(err)
	}
	if err := lora.WriteConfig(adir, lora.NewAdapterConfig(a.Config(), dir)); err != nil {
		t.Fatal(err)
	}

	prompt := []int32{2, 105, 7, 8, 40}
	canvas := []int32{5, 9, 300, 4, 77}
	target := []int32{6, 9, 301, 1, 77}
	out := filepath.Join(t.TempDir(), "sc.safetensors")
	mustProbe(t, "forward", "--model", dir, "--prompt", "2,105,7,8,40", "--canvas", "5,9,300,4,77", "--adapter", adir,
		"--self-cond", "--target", "6,9,301,1,77", "--corrupt", "1,0,1,1,0", "--loss-positions", "all", "--backend", "go", "--out", out)
	got, _, err := mx.LoadSafetensors(e, out)
	if err != nil {
		t.Fatal(err)
	}

	pa, ca := mx.FromInt32(e, prompt, 1, len(prompt)), mx.FromInt32(e, canvas, 1, len(canvas))
	first := m.Forward(pa, ca).Float32s()
	sc := mx.FromFloat32(e, softEmbedding64(m, first), 1, len(canvas), m.Config.TextConfig.HiddenSize)
	secondOf := func() *mx.Array {
		c := m.NewCache()
		m.Encode(pa, c)
		return m.Decode(ca, c, sc)
	}
	second := secondOf().Float32s()
	if d := maxAbsDiff(got["logits"].Float32s(), second); d > 1e-4 {
		t.Fatalf("--self-cond logits differ from the hand second pass by %g", d)
	}
	if d := maxAbsDiff(first, second); d < 1e-2 {
		t.Fatalf("second pass within %g of the first: the check cannot tell them apart", d)
	}
	v := m.Config.TextConfig.VocabSize
	want := 0.0
	for i, tg := range target {
		want += ce64(second[i*v:(i+1)*v], tg) / float64(len(target))
	}
	if d := got["loss"].Item() - want; math.Abs(d) > 1e-4 {
		t.Fatalf("loss %v, hand second pass %v", got["loss"].Item(), want)
	}
	names := a.Names()
	args := make([]*mx.Array, len(names))
	for i, n := range names {
		args[i] = a.Params()[n]
	}
	grads := mx.Grad(func(in []*mx.Array) *mx.Array {
		ps := map[string]*mx.Array{}
		for i, n := range names {
			ps[n] = in[i]
		}
		if err := a.SetParams(ps); err != nil {
			t.Fatal(err)
		}
		return mx.DivScalar(mx.Sum(objective.CrossEntropy(secondOf(), target), false), float64(len(target)))
	})(args)
	for i, n := range names {
		g, ok := got["grad."+n]
		if !ok {
			t.Fatalf("no grad.%s", n)
		}
		// The hand soft embedding is float64, probe's float32: logits differ by ~1e-5.
		if ok, at := mxtest.Close(g.Float32s(), grads[i].Float32s(), 1e-3, 1e-5); !ok {
			t.Errorf("grad.%s differs from the hand second pass's at %d: %v vs %v", n, at, g.Float32s()[at], grads[i].Float32s()[at])
		}
	}

	// With --encoder-loss-weight the loss adds W × the encoder's next-token CE over the
	// clean prompt + target, written also as encoder_loss.
	out2 := filepath.Join(t.TempDir(), "enc.safetensors")
	mustProbe(t, "forward", "--model", dir, "--prompt", "2,105,7,8,40", "--canvas", "5,9,300,4,77", "--adapter", adir,
		"--self-cond", "--target", "6,9,301,1,77", "--corrupt", "1,0,1,1,0", "--loss-positions", "all",
		"--encoder-loss-weight", "0.5", "--backend", "go", "--out", out2)
	got2, _, err := mx.LoadSafetensors(e, out2)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
	seq := append(append([]int32(nil), prompt...), target...)
	hidden, err := m.EncodeHidden(mx.FromInt32(e, seq, 1, len(seq)), nil, m.NewCache())
	if err != nil {
		t.Fatal(err)
	}
	enc := m.Logits(hidden).Float32s()
	encWant := 0.0
	for i := 0; i+1 < len(seq); i++ {
		encWant += ce64(enc[i*v:(i+1)*v], seq[i+1]) / float64(len(seq)-1)
	}
	if d := got2["encoder_loss"].Item() - encWant; math.Abs(d) > 1e-4 {
		t.Fatalf("encoder_loss %v, hand %v", got2["encoder_loss"].Item(), encWant)
	}
	if d := got2["loss"].Item() - (want + 0.5*encWant); math.Abs(d) > 1e-4 {
		t.Fatalf("loss %v, want %v + 0.5·%v", got2["loss"].Item(), want, encWant)
	}
	if d := maxAbsDiff(got2["logits"].Float32s(), got["logits"].Float32s()); d != 0 {
		t.Errorf("the encoder loss changed the logits by %g", d)
	}

	// Without --self-cond the logits are the first pass's.
	out3 := filepath.Join(t.TempDir(), "plain.safetensors")
	mustProbe(t, "forward", "--model", dir, "--prompt", "2,105,7,8,40", "--canvas", "5,9,300,4,77", "--adapter", adir, "--backend", "go", "--out", out3)
	got3, _, err := mx.LoadSafetensors(e, out3)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(got3["logits"].Float32s(), first); d > 1e-5 {
		t.Errorf("plain logits differ from the first pass by %g", d)
	}

	if _, errs, code := probe(t, "forward", "--model", dir, "--prompt", "2", "--canvas", "5", "--encoder-loss-weight", "1", "--out", out3); code != 1 || !strings.Contains(errs, "needs --target") {
		t.Errorf("--encoder-loss-weight without --target: exit %d, %q", code, errs)
	}
}
