package evaluate

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
)

// Eval runs on image rows: the images reach the encoder (scores change with the picture)
// and generation works.
func TestEvalImageRows(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	cfg := dgtest.Spec{Seed: 1, Edit: dgtest.Vision}.Checkpoint(t, e, model)
	data := filepath.Join(dir, "data")
	os.MkdirAll(filepath.Join(data, "img"), 0o755)
	for name, c := range map[string]color.NRGBA{"red.png": {230, 30, 20, 255}, "blue.png": {20, 40, 230, 255}} {
		img := image.NewNRGBA(image.Rect(0, 0, 48, 48))
		for y := range 48 {
			for x := range 48 {
				img.Set(x, y, c)
			}
		}
		f, _ := os.Create(filepath.Join(data, "img", name))
		png.Encode(f, img)
		f.Close()
	}
	row := func(img, answer string) string {
		return `{"messages":[{"role":"user","content":[{"type":"image","path":"img/` + img +
			`"},{"type":"text","text":"Colour?"}]},{"role":"assistant","content":"` + answer + `"}]}` + "\n"
	}
	os.WriteFile(filepath.Join(data, "train.jsonl"), []byte(row("red.png", "warm")), 0o644)
	os.WriteFile(filepath.Join(data, "test.jsonl"), []byte(row("red.png", "warm")+row("blue.png", "warm")), 0o644)

	c := config.Defaults()
	c.Model, c.Data, c.MaxCanvas, c.Eval.NoiseLevels = model, data, 8, []float64{1}
	s, err := session.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LoadData(); err != nil {
		t.Fatal(err)
	}
	cases, err := Cases(s, s.Dataset.Test, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || len(cases[0].Images) != 1 {
		t.Fatalf("%d cases, %d images in the first; want 2 and 1", len(cases), len(cases[0].Images))
	}
	ev := &Evaluator{Session: s, Config: c, Cases: cases, Log: io.Discard}
	m, err := ev.Run("base", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Generations) != 2 || math.IsNaN(m.Loss["1"]) {
		t.Fatalf("generations %d, loss %v", len(m.Generations), m.Loss["1"])
	}
	// Same text, target and corruption, different picture: the loss must change, so the
	// pixels reach the encoder.
	corr := objective.CorruptAt(mx.Key(e, 3), cases[0].Target, 0.5, cfg.TextConfig.VocabSize)
	red, _, _, err := scoreCorruption(s.Model, cases[0], corr, false)
	if err != nil {
		t.Fatal(err)
	}
	swapped := cases[0]
	swapped.Images = cases[1].Images
	blue, _, _, err := scoreCorruption(s.Model, swapped, corr, false)
	if err != nil {
		t.Fatal(err)
	}
	if red == blue {
		t.Fatalf("loss %v with the red picture and with the blue one: the image is ignored", red)
	}
	for _, pe := range m.PerExample {
		if math.IsNaN(pe.Loss["1"]) || math.IsInf(pe.Loss["1"], 0) {
			t.Fatalf("example %d loss %v", pe.Index, pe.Loss["1"])
		}
	}
}
