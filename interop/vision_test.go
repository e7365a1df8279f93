package interop

import (
	"path/filepath"
	"testing"

	"github.com/dgtune/dgtune/imageproc"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestImagePromptFromTransformers: transformers' Gemma 4 image processor and vision tower,
// on a 384×384 picture that needs no resize at 70 soft tokens (24×24 patches → 64 soft
// tokens), give the pixels, the soft-token features and, through the whole model with the
// image block attending bidirectionally, the logits that dgtune computes from the same PNG
// and checkpoint.
func TestImagePromptFromTransformers(t *testing.T) {
	e := mxtest.Go(t)
	ref := reference(t, e)
	m := load(t, e, "vision-f32")
	if m.Vision == nil {
		t.Fatal("the vision tower was not built")
	}
	opt, err := m.Config.ImageOptions()
	if err != nil {
		t.Fatal(err)
	}
	src, err := imageproc.Open(filepath.Join(golden, "vision-f32", "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := src.Preprocess(opt)
	if err != nil {
		t.Fatal(err)
	}
	if img.Height != 384 || img.Width != 384 {
		t.Fatalf("preprocessed to %d×%d, want 384×384 (no resize)", img.Height, img.Width)
	}
	// The first four patches, as transformers flattens them (row in patch, column in patch,
	// channel), rescaled to [0, 1].
	head := need(t, ref, "vision.pixel_values.head").Float32s()
	for p := range 4 {
		for i := range 768 {
			y, x, c := i/48, (i/3)%16, i%3
			got, want := img.At(c, y, p*16+x), head[p*768+i]
			if d := got - want; d > 1e-6 || d < -1e-6 {
				t.Fatalf("patch %d element %d (y %d, x %d, c %d): dgtune %v, transformers %v", p, i, y, x, c, got, want)
			}
		}
	}
	feats, err := m.Vision.Features(img)
	if err != nil {
		t.Fatal(err)
	}
	wantAbs(t, "soft-token features", mx.Reshape(feats, -1, feats.Dim(-1)), need(t, ref, "vision.features"), 2e-4)
	logits, err := m.ForwardWithImages(need(t, ref, "vision.prompt"), need(t, ref, "vision.canvas"), []*imageproc.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	wantAbs(t, "image-prompt logits", logits, need(t, ref, "vision.logits"), 2e-4)
	// transformers 5.17 by default builds the vision-bidirectional masks and then drops
	// them, so its image tokens attend causally; the reference above passes them in. The
	// README says so; this notices when transformers changes.
	if d, _ := maxAbsDiff(t, "default path", logits, need(t, ref, "vision.logits.default")); d < 1e-2 {
		t.Errorf("transformers' default image path now agrees with the bidirectional one (max diff %.3g): update the README's note", d)
	}
}
