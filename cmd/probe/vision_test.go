package main

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/imageproc"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestVisionForward: mkmodel --vision writes an image-capable tiny checkpoint, and forward
// --image expands the prompt's one image token (id 510 = vocab − 2) into the image's
// block and gives the logits of the model's own image forward.
func TestVisionForward(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	out := mustProbe(t, "mkmodel", "--preset", "tiny", "--seed", "4", "--vision", "--out", dir)
	// input_proj 32·768 = 24576, position table 2·64·32 = 4096, two layers of
	// 4·32·32 + 2·32·64 + 64·32 + 2·16 + 4·32 = 10400, std_bias/std_scale 64,
	// projection 64·32 = 2048: 51584.
	if !strings.Contains(out, "vision tower: 51584 parameters") {
		t.Fatalf("mkmodel output %q lacks the vision parameter count", out)
	}
	m, err := dg.Load(e, dir, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Vision == nil {
		t.Fatal("mkmodel --vision wrote no vision tower")
	}
	img := filepath.Join(t.TempDir(), "pic.png")
	var b bytes.Buffer
	pic := image.NewNRGBA(image.Rect(0, 0, 50, 40))
	for i := range pic.Pix {
		pic.Pix[i] = uint8(i * 7)
	}
	if err := png.Encode(&b, pic); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(t.TempDir(), "f.safetensors")
	mustProbe(t, "forward", "--model", dir, "--prompt", "2,105,510,7,8", "--canvas", "5,9,300", "--image", img,
		"--target", "6,9,301", "--corrupt", "1,1,0", "--backend", "go", "--out", res)
	got, _, err := mx.LoadSafetensors(e, res)
	if err != nil {
		t.Fatal(err)
	}
	// 50×40 under the 16-token budget: factor √(36864/2000) = 4.293, height 171.7/48 → 144,
	// width 214.7/48 → 192; 9·12 patches → 12 soft tokens.
	src, err := imageproc.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	images, err := m.Images([]*imageproc.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{2, 105, 509}
	for range 12 {
		ids = append(ids, 510)
	}
	ids = append(ids, 511, 7, 8)
	want, err := m.ForwardWithImages(mx.FromInt32(e, ids, 1, len(ids)), mx.FromInt32(e, []int32{5, 9, 300}, 1, 3), images)
	if err != nil {
		t.Fatal(err)
	}
	if gv, wv := got["logits"].Float32s(), want.Float32s(); !slices.Equal(gv, wv) {
		t.Fatal("forward --image logits differ from ForwardWithImages on the expanded prompt")
	}
	if _, ok := got["loss"]; !ok {
		t.Fatal("no loss with --target/--corrupt")
	}
	text := filepath.Join(t.TempDir(), "t.safetensors")
	mustProbe(t, "forward", "--model", dir, "--prompt", "2,105,7,8", "--canvas", "5,9,300", "--backend", "go", "--out", text)
	if tg, _, err := mx.LoadSafetensors(e, text); err != nil || slices.Equal(tg["logits"].Float32s(), got["logits"].Float32s()) {
		t.Fatalf("text-only logits equal the image logits (err %v)", err)
	}

	// Bad inputs: one clear line, exit 1, nothing written.
	bad := filepath.Join(t.TempDir(), "bad.png")
	os.WriteFile(bad, b.Bytes()[:b.Len()/2], 0o644)
	plain := t.TempDir()
	mustProbe(t, "mkmodel", "--preset", "tiny", "--out", plain)
	for _, c := range []struct {
		model, prompt, image, want string
	}{
		{dir, "2,105,7", img, "prompt has 0 image placeholder(s)"},
		{dir, "2,510,510", img, "prompt has 2 image placeholder(s)"},
		{dir, "2,510", bad, "truncated or corrupt image"},
		{dir, "2,510", filepath.Join(t.TempDir(), "none.png"), "no such file"},
		{plain, "2,510", img, "no vision_config"},
	} {
		o := filepath.Join(t.TempDir(), "x.safetensors")
		_, errs, code := probe(t, "forward", "--model", c.model, "--prompt", c.prompt, "--canvas", "1,2", "--image", c.image, "--backend", "go", "--out", o)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("forward --prompt %s --image %s: exit %d, stderr %q; want exit 1 and one line containing %q", c.prompt, filepath.Base(c.image), code, errs, c.want)
		}
		if _, err := os.Stat(o); !os.IsNotExist(err) {
			t.Errorf("forward --image %s wrote %s", filepath.Base(c.image), o)
		}
	}
}
