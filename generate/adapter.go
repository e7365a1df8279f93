package generate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dgtune/dgtune/lora"
)

// Mount attaches the adapter f (read from path, trained as t says) to the model. An
// adapter made for another geometry is refused in one line that names the base it was
// trained on and the first tensor that differs, instead of lora's list of every one.
func (g *Generator) Mount(f *lora.AdapterFile, path, modelDir string, t Trained) error {
	_, err := lora.Mount(g.Model, f)
	if err == nil || !errors.Is(err, lora.ErrMismatch) {
		return err
	}
	base := t.BaseModel
	if base == "" {
		base = "not recorded"
	}
	return fmt.Errorf("--adapter %s does not fit --model %s (the adapter's base_model: %s): %s", path, modelDir, base, firstMismatch(err))
}

// firstMismatch shortens lora's mismatch error ("…: N of M modules mismatch …:\n  first\n
// second…") to its count and first entry.
func firstMismatch(err error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, lora.ErrMismatch.Error()+": "); ok {
		msg = rest
	}
	head, list, ok := strings.Cut(msg, ":\n  ")
	if !ok {
		return strings.ReplaceAll(msg, "\n", "; ")
	}
	first, _, _ := strings.Cut(list, "\n")
	return head + "; the first: " + strings.TrimSpace(first)
}
