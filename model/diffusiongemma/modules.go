package diffusiongemma

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// LinearSlot returns a pointer to the linear at a module path such as
// "model.decoder.layers.3.self_attn.q_proj" (also self_conditioning's gate/up/down), so
// that adapters can wrap it in place.
func (m *Model) LinearSlot(module string) (*Linear, error) {
	sc := DecoderPrefix + ".self_conditioning."
	if rest, ok := strings.CutPrefix(module, sc); ok {
		switch rest {
		case "gate_proj":
			return &m.SelfCond.Gate, nil
		case "up_proj":
			return &m.SelfCond.Up, nil
		case "down_proj":
			return &m.SelfCond.Down, nil
		}
		return nil, fmt.Errorf("diffusiongemma: no linear %q", module)
	}
	rest, ok := strings.CutPrefix(module, DecoderPrefix+".layers.")
	if !ok {
		return nil, fmt.Errorf("diffusiongemma: no linear %q", module)
	}
	num, key, ok := strings.Cut(rest, ".")
	i, err := strconv.Atoi(num)
	if !ok || err != nil || i < 0 || i >= len(m.Layers) {
		return nil, fmt.Errorf("diffusiongemma: no linear %q (model has %d layers)", module, len(m.Layers))
	}
	l := m.Layers[i]
	var slot *Linear
	switch key {
	case "self_attn.q_proj":
		slot = &l.Q
	case "self_attn.k_proj":
		slot = &l.K
	case "self_attn.v_proj":
		slot = &l.V
	case "self_attn.o_proj":
		slot = &l.O
	case "mlp.gate_proj":
		slot = &l.Gate
	case "mlp.up_proj":
		slot = &l.Up
	case "mlp.down_proj":
		slot = &l.Down
	case "router.proj":
		slot = &l.RouterProj
	}
	if slot == nil || *slot == nil {
		return nil, fmt.Errorf("diffusiongemma: no linear %q", module)
	}
	return slot, nil
}

// DenseTensors returns pointers to every unquantized float tensor of the model by its
// checkpoint name: what `fine_tune_type: full` trains and what a full checkpoint saves.
// Quantized modules are not included.
func (m *Model) DenseTensors() map[string]**mx.Array {
	out := map[string]**mx.Array{}
	lin := func(name string, l Linear) {
		if d, ok := l.(*Dense); ok {
			out[name+".weight"] = &d.W
		}
	}
	if m.Embed.Quant == nil {
		out[DecoderPrefix+".embed_tokens.weight"] = &m.Embed.Dense
	}
	out[DecoderPrefix+".norm.weight"] = &m.Norm
	sc := DecoderPrefix + ".self_conditioning"
	out[sc+".pre_norm.weight"] = &m.SelfCond.PreNorm
	lin(sc+".gate_proj", m.SelfCond.Gate)
	lin(sc+".up_proj", m.SelfCond.Up)
	lin(sc+".down_proj", m.SelfCond.Down)
	for i := range m.EncoderScalars {
		out[fmt.Sprintf("%s.%d.layer_scalar", EncoderLayersPrefix, i)] = &m.EncoderScalars[i]
	}
	for _, l := range m.Layers {
		p := LayerPrefix(l.Index) + "."
		lin(p+"self_attn.q_proj", l.Q)
		lin(p+"self_attn.k_proj", l.K)
		if l.V != nil {
			lin(p+"self_attn.v_proj", l.V)
		}
		lin(p+"self_attn.o_proj", l.O)
		out[p+"self_attn.q_norm.weight"] = &l.QNorm
		out[p+"self_attn.k_norm.weight"] = &l.KNorm
		lin(p+"mlp.gate_proj", l.Gate)
		lin(p+"mlp.up_proj", l.Up)
		lin(p+"mlp.down_proj", l.Down)
		lin(p+"router.proj", l.RouterProj)
		out[p+"router.scale"] = &l.RouterScale
		out[p+"router.per_expert_scale"] = &l.PerExpertScale
		if l.GateUp.Dense != nil {
			out[p+"experts.gate_up_proj.weight"] = &l.GateUp.Dense
		}
		if l.Experts.Dense != nil {
			out[p+"experts.down_proj.weight"] = &l.Experts.Dense
		}
		for name, ptr := range map[string]**mx.Array{
			"input_layernorm": &l.InputNorm, "post_attention_layernorm": &l.PostAttnNorm,
			"pre_feedforward_layernorm": &l.PreFFNorm, "post_feedforward_layernorm_1": &l.PostFFNorm1,
			"pre_feedforward_layernorm_2": &l.PreFFNorm2, "post_feedforward_layernorm_2": &l.PostFFNorm2,
			"post_feedforward_layernorm": &l.PostFFNorm,
		} {
			out[p+name+".weight"] = ptr
		}
		out[p+"layer_scalar"] = &l.Scalar
	}
	return out
}
