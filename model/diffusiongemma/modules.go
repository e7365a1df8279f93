package diffusiongemma

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// LinearSlot returns a pointer to the linear at a module path such as
// "model.decoder.layers.3.self_attn.q_proj" (also self_conditioning's gate/up/down), so
// that adapters can wrap it in place. The linears are the KindLinear rows of the tensor
// table.
func (m *Model) LinearSlot(module string) (*Linear, error) {
	table := tensorTable()
	rest, inLayer := strings.CutPrefix(module, DecoderPrefix+".layers.")
	if !inLayer {
		for k := range table {
			if d := &table[k]; d.scope == scopeModel && d.kind == KindLinear && d.module == module {
				return d.slot(m, 0).linear, nil
			}
		}
		return nil, fmt.Errorf("diffusiongemma: no linear %q", module)
	}
	num, key, ok := strings.Cut(rest, ".")
	i, err := strconv.Atoi(num)
	if !ok || err != nil || i < 0 || i >= len(m.Layers) {
		return nil, fmt.Errorf("diffusiongemma: no linear %q (model has %d layers)", module, len(m.Layers))
	}
	for k := range table {
		d := &table[k]
		if d.scope != scopeLayer || d.kind != KindLinear || d.module != key {
			continue
		}
		if slot := d.slot(m, i).linear; *slot != nil {
			return slot, nil
		}
		break
	}
	return nil, fmt.Errorf("diffusiongemma: no linear %q", module)
}

// DenseTensors returns pointers to every unquantized float tensor of the model by its
// checkpoint name: what `fine_tune_type: full` trains and what a full checkpoint saves.
// Quantized modules are not included.
func (m *Model) DenseTensors() map[string]**mx.Array {
	out := map[string]**mx.Array{}
	var t *TextConfig
	if m.Config != nil {
		t = &m.Config.TextConfig
	}
	for r := range textTensors(t, len(m.Layers)) {
		if r.def.scope == scopeEncoderLayer && r.layer >= len(m.EncoderScalars) {
			continue // a hand-built model without the encoder's scalars
		}
		s := r.def.slot(m, r.layer)
		switch r.def.kind {
		case KindParam:
			out[r.name] = s.array
		case KindLinear:
			if d, ok := (*s.linear).(*Dense); ok {
				out[r.name] = &d.W
			}
		case KindEmbedding:
			if e := *s.embed; e != nil && e.Quant == nil {
				out[r.name] = &e.Dense
			}
		case KindExperts:
			if x := *s.experts; x != nil && x.Dense != nil {
				out[r.name] = &x.Dense
			}
		}
	}
	return out
}
