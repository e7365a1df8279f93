package train

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
)

// writeVisionModel writes the tiny preset with the synthetic vision tower and a byte-level
// tokenizer (whose three top ids are the image tokens the preset expects).
func writeVisionModel(t *testing.T, dir string) string {
	t.Helper()
	dgtest.Spec{Preset: dg.PresetTiny, Seed: 1, Bits: dg.BitsNone, Edit: dgtest.Vision}.Checkpoint(t, mxtest.Go(t), dir)
	return dir
}

// writePNG writes a w×h single-colour PNG.
func writePNG(t *testing.T, path string, w, h int, c color.NRGBA) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		copy(img.Pix[i:], []uint8{c.R, c.G, c.B, c.A})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// colourRow asks for the colour of an image; the two answers have the same byte length,
// so the canvas length does not give the answer away and only the image can.
func colourRow(img, answer string) string {
	return `{"messages":[{"role":"user","content":[{"type":"image","path":"` + img +
		`"},{"type":"text","text":"Colour?"}]},{"role":"assistant","content":"` + answer + `"}]}`
}

// TestTrainOnImages trains LoRA on a toy image task — a red picture means "warm", a blue
// one "cool", with the same text prompt — and checks (1) that the fixed-corruption
// validation loss on the image rows falls, and (2) that the trained adapter reads the
// picture: with the canvas fully corrupted (t = 1, so only the image tells the two answers
// apart) the loss with the right pictures is well below the loss with them swapped.
//
// Observed on the go engine: validation loss 15.5 → 2.3 in 200 steps; fully corrupted,
// 2.3 nats with the right pictures against 6.5 with them swapped.
//
// The two answers have the same byte length, so the canvas length gives nothing away. The
// noise range is raised to [0.8, 1] because every letter left uncorrupted names the answer
// by itself; at the default [0.4, 0.8] the model learns to read the canvas first. The
// sliding window is widened to 64 so that both layers of the tiny model see the image
// (with the preset's 8, the canvas's sliding layer only sees the generation prompt).
func TestTrainOnImages(t *testing.T) {
	if testing.Short() {
		t.Skip("200 training steps (≈6 s)")
	}
	dir := t.TempDir()
	model := writeVisionModel(t, filepath.Join(dir, "model"))
	data := filepath.Join(dir, "data")
	pics := []struct {
		file   string
		w, h   int
		c      color.NRGBA
		answer string
	}{
		{"red1.png", 40, 30, color.NRGBA{230, 30, 20, 255}, "warm"},
		{"red2.png", 25, 50, color.NRGBA{200, 60, 40, 255}, "warm"},
		{"blue1.png", 30, 40, color.NRGBA{20, 40, 230, 255}, "cool"},
		{"blue2.png", 60, 20, color.NRGBA{40, 70, 200, 255}, "cool"},
	}
	var rows, swapped []string
	for i, p := range pics {
		writePNG(t, filepath.Join(data, "img", p.file), p.w, p.h, p.c)
		rows = append(rows, colourRow("img/"+p.file, p.answer))
		other := pics[(i+2)%len(pics)] // the other colour
		swapped = append(swapped, colourRow("../data/img/"+other.file, p.answer))
	}
	writeFile(t, filepath.Join(data, "train.jsonl"), rows...)
	writeFile(t, filepath.Join(data, "valid.jsonl"), rows...)
	writeFile(t, filepath.Join(dir, "swapped", "train.jsonl"), swapped...)

	cfg := tinyConfig(model, data, filepath.Join(dir, "adapters"))
	cfg.Iters = 200
	cfg.LearningRate = 2e-3
	cfg.TMin, cfg.TMax = 0.8, 1
	cfg.StepsPerReport = 10
	cfg.StepsPerEval = 0
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	var vals []float64
	for _, ev := range readMetrics(t, cfg.AdapterPath) {
		if ev.ValLoss != nil {
			vals = append(vals, *ev.ValLoss)
		}
	}
	if len(vals) != 2 {
		t.Fatalf("%d val events, want 2 (start and end)", len(vals))
	}
	t.Logf("image rows: val loss %.3f → %.3f", vals[0], vals[1])
	if vals[1] > 0.5*vals[0] {
		t.Errorf("val loss on the image rows went from %.3f to %.3f; want below half", vals[0], vals[1])
	}

	s, err := session.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := lora.LoadDir(s.Engine, cfg.AdapterPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lora.Mount(s.Model, f); err != nil {
		t.Fatal(err)
	}
	right, wrong := fullNoiseLoss(t, s, data), fullNoiseLoss(t, s, filepath.Join(dir, "swapped"))
	t.Logf("trained adapter, canvas fully corrupted: loss %.3f with the right pictures, %.3f with them swapped", right, wrong)
	if !(wrong > right+1) {
		t.Errorf("swapping the pictures moved the loss from %.3f to only %.3f: the adapter does not read the image", right, wrong)
	}
}

// fullNoiseLoss is the mean cross-entropy of the train split of dataDir with every canvas
// position replaced by noise, averaged over four noise draws per example.
func fullNoiseLoss(t *testing.T, s *session.Session, dataDir string) float64 {
	t.Helper()
	s.Config.Data = dataDir
	if err := s.LoadData(); err != nil {
		t.Fatal(err)
	}
	pairs, err := s.Pairs(s.Dataset.Train)
	if err != nil {
		t.Fatal(err)
	}
	var sum, count float64
	for _, p := range pairs {
		if len(p.Images) != 1 || !strings.Contains(s.Tokenizer.Decode(p.Prompt, true), "Colour?") {
			t.Fatalf("pair %d lacks its image or its text", p.Index)
		}
		for draw := range 4 {
			c := objective.CorruptAt(mx.Key(s.Engine, uint64(100*p.Index+draw)), p.Target, 1, s.Model.Config.TextConfig.VocabSize)
			terms := s.Objective.ExampleTerms(s.Model, objective.Example{Prompt: p.Prompt, Target: p.Target, Images: p.Images}, c)
			sum += terms.Sum.Item()
			count += terms.Count
		}
	}
	return sum / count
}

// TestImageRowErrors: image rows that cannot be encoded fail naming the row.
func TestImageRowErrors(t *testing.T) {
	dir := t.TempDir()
	vision := writeVisionModel(t, filepath.Join(dir, "vision"))
	text := writeTinyModel(t, filepath.Join(dir, "text"), dg.BitsNone, nil)
	data := filepath.Join(dir, "data")
	writePNG(t, filepath.Join(data, "img", "red.png"), 40, 30, color.NRGBA{230, 30, 20, 255})
	for _, c := range []struct {
		name, model, row string
		maxPrompt        int
		want             string
	}{
		{"text-only model", text, colourRow("img/red.png", "warm"), 0,
			"data: train.jsonl:1: example 0: encode: diffusiongemma: the config has no vision_config: image inputs are not supported"},
		{"placeholder without image", vision, `{"prompt":"<|image|> what?","completion":"x"}`, 0,
			"data: train.jsonl:1: example 0: encode: prompt has 1 image placeholder(s) <|image|> but the example has 0 image(s)"},
		// <bos><|turn>user\n = 7 tokens with the byte tokenizer; the 40×30 image becomes
		// 192×144 (12 soft tokens), a block of 14; "Colour?<turn|>\n<|turn>model\n<|channel>
		// thought\n<channel|>" is 26: 47 tokens, and the last 20 start after the image.
		{"max_prompt cuts the image", vision, colourRow("img/red.png", "warm"), 20,
			"data: train.jsonl:1: example 0: encode: prompt of 47 tokens exceeds max_prompt 20, and keeping its last 20 tokens would cut an image out"},
	} {
		writeFile(t, filepath.Join(data, "train.jsonl"), c.row)
		cfg := tinyConfig(c.model, data, filepath.Join(dir, "adapters"))
		cfg.MaxPrompt = c.maxPrompt
		s, err := session.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.LoadData(); err != nil {
			t.Fatal(err)
		}
		_, err = s.Pairs(s.Dataset.Train)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.name, err, c.want)
		}
	}
}
