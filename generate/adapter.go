package generate

import (
	"errors"
	"fmt"

	"github.com/dgtune/dgtune/lora"
)

// Mount attaches the adapter f (read from path) to the model. An adapter made for
// another geometry is refused in one line: lora's mismatch error already names the base
// the adapter was trained on and the first tensor that differs.
func (g *Generator) Mount(f *lora.AdapterFile, path, modelDir string) error {
	_, err := lora.Mount(g.Model, f)
	var mm *lora.MismatchError
	if errors.As(err, &mm) {
		return fmt.Errorf("--adapter %s does not fit --model %s: %d of %d modules differ at rank %d (%s); the first %s",
			path, modelDir, mm.BadModules, mm.Modules, mm.Rank, trainedOn(mm), mm.Problems[0])
	}
	return err
}

// trainedOn says which base the adapter records.
func trainedOn(mm *lora.MismatchError) string {
	if mm.BaseModel == "" {
		return "the adapter records no base_model"
	}
	return "the adapter was trained on " + mm.BaseModel
}
