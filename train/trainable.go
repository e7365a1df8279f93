package train

import (
	"fmt"
	"sort"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/optim"
)

// fullParams is the optim.Trainable of fine_tune_type full (lora.Adapter is lora's).
var _ optim.Trainable = (*fullParams)(nil)

// fullParams trains every unquantized float tensor of the model in place.
type fullParams struct {
	slots map[string]**mx.Array
}

func newFullParams(m *dg.Model) (*fullParams, error) {
	slots := m.DenseTensors()
	// Every expected tensor is dense only in an unquantized checkpoint.
	if len(slots) < len(dg.ExpectedTensors(m.Config)) {
		return nil, fmt.Errorf("fine_tune_type full needs an unquantized model; this one is quantized (use lora)")
	}
	return &fullParams{slots: slots}, nil
}

func (f *fullParams) Params() map[string]*mx.Array {
	out := make(map[string]*mx.Array, len(f.slots))
	for n, p := range f.slots {
		out[n] = *p
	}
	return out
}

func (f *fullParams) SetParams(p map[string]*mx.Array) error {
	for n, a := range p {
		slot, ok := f.slots[n]
		if !ok {
			return fmt.Errorf("full fine-tune: unknown tensor %q", n)
		}
		*slot = a
	}
	return nil
}

func sortedNames(p map[string]*mx.Array) []string {
	names := make([]string, 0, len(p))
	for n := range p {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func countParams(p map[string]*mx.Array) int64 {
	var n int64
	for _, a := range p {
		n += int64(a.Size())
	}
	return n
}
