package diffusiongemma

import (
	"fmt"
	"iter"

	"github.com/dgtune/dgtune/mx"
)

// This file is the text model's tensor table (§2.2), written once: every tensor's name,
// logical shape as a function of the config, whether it is quantizable, and where it lives
// in a Model. Loading (Build), the expected-tensor list (ExpectedTensors), the LoRA targets
// (LoRAKeys, LoRATargets), module lookup (LinearSlot, DenseTensors) and the memory
// estimate's weights (StoredTensors, WeightArrays) all iterate it, so a new tensor is one
// row here.

// TensorKind says what a tensor of the table is, which decides how it is loaded, whether
// it is quantizable and which field type holds it.
type TensorKind int

const (
	// KindParam is an unquantizable float tensor: a norm weight, a scale or a scalar.
	KindParam TensorKind = iota
	// KindLinear is a 2-D linear [out, in] (Dense or Quantized).
	KindLinear
	// KindEmbedding is the token table [vocab, hidden], also the tied head.
	KindEmbedding
	// KindExperts is a stack of expert linears [E, out, in] (SwitchLinear).
	KindExperts
)

// Quantizable is true for the kinds MLX checkpoints may store quantized: the Linear,
// Embedding and SwitchLinear modules of nn.quantize.
func (k TensorKind) Quantizable() bool { return k != KindParam }

// tensorScope says where a row's tensors sit and how many there are.
type tensorScope int

const (
	scopeModel        tensorScope = iota // once, under its own full module path
	scopeEncoderLayer                    // once per layer, under EncoderLayersPrefix.i
	scopeLayer                           // once per decoder layer, under LayerPrefix(i)
)

// tensorSlot is where a tensor lives in a Model: exactly one field is set, by kind.
type tensorSlot struct {
	array   **mx.Array     // KindParam
	linear  *Linear        // KindLinear
	embed   **Embedding    // KindEmbedding
	experts **ExpertWeight // KindExperts
}

// tensorDef is one row of the table.
type tensorDef struct {
	scope tensorScope
	// module is the owning module's path: the full path for scopeModel, the path inside
	// the layer ("self_attn.q_proj"; "" for the layer itself) for the per-layer scopes.
	module string
	// param is the tensor's last name component: "weight", "scale", "layer_scalar".
	param string
	kind  TensorKind
	// shape is the logical, unquantized shape for layer i (ignored by scopeModel rows).
	shape func(t *TextConfig, i int) []int
	// present is false for layers without the tensor (nil: every layer has it).
	present func(t *TextConfig, i int) bool
	// lora marks the LoRA-adaptable linears: loraDefault is optiq's default set (§5.3),
	// loraOptional the other keys a user may name.
	lora loraUse
	// group is the memory estimate's weight group.
	group string
	// slot returns the row's field in m for layer i (m.Layers[i] must exist for scopeLayer).
	slot func(m *Model, i int) tensorSlot
}

type loraUse int

const (
	loraNone loraUse = iota
	loraDefault
	loraOptional
)

// Weight groups of the memory estimate, in report order.
const (
	groupEmbedding = "embedding (and tied head)"
	groupAttention = "attention projections"
	groupMLP       = "dense MLP"
	groupRouter    = "router"
	groupExperts   = "experts"
	groupSelfCond  = "self-conditioning"
	groupNorms     = "norms and scalars"
)

// Shape helpers: the table's shapes as functions of the config.
func hidden(t *TextConfig, _ int) []int  { return []int{t.HiddenSize} }
func headDim(t *TextConfig, i int) []int { return []int{t.LayerHeadDim(i)} }
func scalar(*TextConfig, int) []int      { return []int{1} }

func qWidth(t *TextConfig, i int) int  { return t.NumAttentionHeads * t.LayerHeadDim(i) }
func kvWidth(t *TextConfig, i int) int { return t.LayerKVHeads(i) * t.LayerHeadDim(i) }

// modelArray, layerArray and layerLinear build the common slots.
func modelArray(f func(m *Model) **mx.Array) func(*Model, int) tensorSlot {
	return func(m *Model, _ int) tensorSlot { return tensorSlot{array: f(m)} }
}

func modelLinear(f func(m *Model) *Linear) func(*Model, int) tensorSlot {
	return func(m *Model, _ int) tensorSlot { return tensorSlot{linear: f(m)} }
}

func layerArray(f func(l *Layer) **mx.Array) func(*Model, int) tensorSlot {
	return func(m *Model, i int) tensorSlot { return tensorSlot{array: f(m.Layers[i])} }
}

func layerLinear(f func(l *Layer) *Linear) func(*Model, int) tensorSlot {
	return func(m *Model, i int) tensorSlot { return tensorSlot{linear: f(m.Layers[i])} }
}

func layerExperts(f func(l *Layer) **ExpertWeight) func(*Model, int) tensorSlot {
	return func(m *Model, i int) tensorSlot { return tensorSlot{experts: f(m.Layers[i])} }
}

// layerNorm is one of a layer's seven RMSNorm weights (§2.2), all [hidden].
func layerNorm(module string, f func(l *Layer) **mx.Array) tensorDef {
	return tensorDef{scope: scopeLayer, module: module, param: "weight", kind: KindParam, shape: hidden, group: groupNorms, slot: layerArray(f)}
}

// tensorTable returns the rows in canonical order (the order of §2.2 and of
// ExpectedTensors): the model's tensors, the encoder's layer scalars, then a decoder
// layer's tensors. It is built per call so that no table is global mutable state.
func tensorTable() []tensorDef {
	sc := DecoderPrefix + ".self_conditioning"
	return []tensorDef{
		{scope: scopeModel, module: DecoderPrefix + ".embed_tokens", param: "weight", kind: KindEmbedding, group: groupEmbedding,
			shape: func(t *TextConfig, _ int) []int { return []int{t.VocabSize, t.HiddenSize} },
			slot:  func(m *Model, _ int) tensorSlot { return tensorSlot{embed: &m.Embed} }},
		{scope: scopeModel, module: DecoderPrefix + ".norm", param: "weight", kind: KindParam, shape: hidden, group: groupNorms,
			slot: modelArray(func(m *Model) **mx.Array { return &m.Norm })},
		{scope: scopeModel, module: sc + ".pre_norm", param: "weight", kind: KindParam, shape: hidden, group: groupNorms,
			slot: modelArray(func(m *Model) **mx.Array { return &m.SelfCond.PreNorm })},
		{scope: scopeModel, module: sc + ".gate_proj", param: "weight", kind: KindLinear, group: groupSelfCond,
			shape: func(t *TextConfig, _ int) []int { return []int{t.IntermediateSize, t.HiddenSize} },
			slot:  modelLinear(func(m *Model) *Linear { return &m.SelfCond.Gate })},
		{scope: scopeModel, module: sc + ".up_proj", param: "weight", kind: KindLinear, group: groupSelfCond,
			shape: func(t *TextConfig, _ int) []int { return []int{t.IntermediateSize, t.HiddenSize} },
			slot:  modelLinear(func(m *Model) *Linear { return &m.SelfCond.Up })},
		{scope: scopeModel, module: sc + ".down_proj", param: "weight", kind: KindLinear, group: groupSelfCond,
			shape: func(t *TextConfig, _ int) []int { return []int{t.HiddenSize, t.IntermediateSize} },
			slot:  modelLinear(func(m *Model) *Linear { return &m.SelfCond.Down })},

		{scope: scopeEncoderLayer, param: "layer_scalar", kind: KindParam, shape: scalar, group: groupNorms,
			slot: func(m *Model, i int) tensorSlot { return tensorSlot{array: &m.EncoderScalars[i]} }},

		{scope: scopeLayer, module: "self_attn.q_proj", param: "weight", kind: KindLinear, lora: loraDefault, group: groupAttention,
			shape: func(t *TextConfig, i int) []int { return []int{qWidth(t, i), t.HiddenSize} },
			slot:  layerLinear(func(l *Layer) *Linear { return &l.Q })},
		{scope: scopeLayer, module: "self_attn.k_proj", param: "weight", kind: KindLinear, lora: loraDefault, group: groupAttention,
			shape: func(t *TextConfig, i int) []int { return []int{kvWidth(t, i), t.HiddenSize} },
			slot:  layerLinear(func(l *Layer) *Linear { return &l.K })},
		// Full-attention layers have no v_proj: their values come from k_proj.
		{scope: scopeLayer, module: "self_attn.v_proj", param: "weight", kind: KindLinear, lora: loraDefault, group: groupAttention,
			shape:   func(t *TextConfig, i int) []int { return []int{kvWidth(t, i), t.HiddenSize} },
			present: func(t *TextConfig, i int) bool { return t.HasVProj(i) },
			slot:    layerLinear(func(l *Layer) *Linear { return &l.V })},
		{scope: scopeLayer, module: "self_attn.o_proj", param: "weight", kind: KindLinear, lora: loraDefault, group: groupAttention,
			shape: func(t *TextConfig, i int) []int { return []int{t.HiddenSize, qWidth(t, i)} },
			slot:  layerLinear(func(l *Layer) *Linear { return &l.O })},
		{scope: scopeLayer, module: "self_attn.q_norm", param: "weight", kind: KindParam, shape: headDim, group: groupNorms,
			slot: layerArray(func(l *Layer) **mx.Array { return &l.QNorm })},
		{scope: scopeLayer, module: "self_attn.k_norm", param: "weight", kind: KindParam, shape: headDim, group: groupNorms,
			slot: layerArray(func(l *Layer) **mx.Array { return &l.KNorm })},
		{scope: scopeLayer, module: "mlp.gate_proj", param: "weight", kind: KindLinear, lora: loraDefault, group: groupMLP,
			shape: func(t *TextConfig, _ int) []int { return []int{t.IntermediateSize, t.HiddenSize} },
			slot:  layerLinear(func(l *Layer) *Linear { return &l.Gate })},
		{scope: scopeLayer, module: "mlp.up_proj", param: "weight", kind: KindLinear, lora: loraDefault, group: groupMLP,
			shape: func(t *TextConfig, _ int) []int { return []int{t.IntermediateSize, t.HiddenSize} },
			slot:  layerLinear(func(l *Layer) *Linear { return &l.Up })},
		{scope: scopeLayer, module: "mlp.down_proj", param: "weight", kind: KindLinear, lora: loraDefault, group: groupMLP,
			shape: func(t *TextConfig, _ int) []int { return []int{t.HiddenSize, t.IntermediateSize} },
			slot:  layerLinear(func(l *Layer) *Linear { return &l.Down })},
		{scope: scopeLayer, module: "router.proj", param: "weight", kind: KindLinear, lora: loraOptional, group: groupRouter,
			shape: func(t *TextConfig, _ int) []int { return []int{t.NumExperts, t.HiddenSize} },
			slot:  layerLinear(func(l *Layer) *Linear { return &l.RouterProj })},
		{scope: scopeLayer, module: "router", param: "scale", kind: KindParam, shape: hidden, group: groupNorms,
			slot: layerArray(func(l *Layer) **mx.Array { return &l.RouterScale })},
		{scope: scopeLayer, module: "router", param: "per_expert_scale", kind: KindParam, group: groupNorms,
			shape: func(t *TextConfig, _ int) []int { return []int{t.NumExperts} },
			slot:  layerArray(func(l *Layer) **mx.Array { return &l.PerExpertScale })},
		// Fused experts: rows [0, I) of gate_up are the gate, [I, 2I) the up projection.
		{scope: scopeLayer, module: "experts.gate_up_proj", param: "weight", kind: KindExperts, group: groupExperts,
			shape: func(t *TextConfig, _ int) []int { return []int{t.NumExperts, 2 * t.MoeIntermediateSize, t.HiddenSize} },
			slot:  layerExperts(func(l *Layer) **ExpertWeight { return &l.GateUp })},
		{scope: scopeLayer, module: "experts.down_proj", param: "weight", kind: KindExperts, group: groupExperts,
			shape: func(t *TextConfig, _ int) []int { return []int{t.NumExperts, t.HiddenSize, t.MoeIntermediateSize} },
			slot:  layerExperts(func(l *Layer) **ExpertWeight { return &l.Experts })},
		layerNorm("input_layernorm", func(l *Layer) **mx.Array { return &l.InputNorm }),
		layerNorm("post_attention_layernorm", func(l *Layer) **mx.Array { return &l.PostAttnNorm }),
		layerNorm("pre_feedforward_layernorm", func(l *Layer) **mx.Array { return &l.PreFFNorm }),
		layerNorm("post_feedforward_layernorm_1", func(l *Layer) **mx.Array { return &l.PostFFNorm1 }),
		layerNorm("pre_feedforward_layernorm_2", func(l *Layer) **mx.Array { return &l.PreFFNorm2 }),
		layerNorm("post_feedforward_layernorm_2", func(l *Layer) **mx.Array { return &l.PostFFNorm2 }),
		layerNorm("post_feedforward_layernorm", func(l *Layer) **mx.Array { return &l.PostFFNorm }),
		{scope: scopeLayer, param: "layer_scalar", kind: KindParam, shape: scalar, group: groupNorms,
			slot: layerArray(func(l *Layer) **mx.Array { return &l.Scalar })},
	}
}

// modulePath is the full module path of row d for layer i.
func (d *tensorDef) modulePath(i int) string {
	var p string
	switch d.scope {
	case scopeModel:
		return d.module
	case scopeEncoderLayer:
		p = fmt.Sprintf("%s.%d", EncoderLayersPrefix, i)
	default:
		p = LayerPrefix(i)
	}
	if d.module == "" {
		return p
	}
	return p + "." + d.module
}

// tensorRef is one tensor of the table instantiated for a layer count: row d at layer
// i (0 for scopeModel rows).
type tensorRef struct {
	def    *tensorDef
	layer  int
	module string // full module path
	name   string // full tensor name: module + "." + param
}

// textTensors yields every tensor of a model with numLayers layers, in canonical order:
// the model's rows, every layer's encoder rows, then every layer's decoder rows. present
// is consulted only when t is not nil (a hand-built model without a config has every
// slot, nil or not).
func textTensors(t *TextConfig, numLayers int) iter.Seq[tensorRef] {
	return func(yield func(tensorRef) bool) {
		table := tensorTable()
		for k := range table {
			if d := &table[k]; d.scope == scopeModel {
				if !yield(tensorRef{def: d, module: d.module, name: d.module + "." + d.param}) {
					return
				}
			}
		}
		for _, scope := range []tensorScope{scopeEncoderLayer, scopeLayer} {
			for i := range numLayers {
				for k := range table {
					d := &table[k]
					if d.scope != scope || (t != nil && d.present != nil && !d.present(t, i)) {
						continue
					}
					mod := d.modulePath(i)
					if !yield(tensorRef{def: d, layer: i, module: mod, name: mod + "." + d.param}) {
						return
					}
				}
			}
		}
	}
}
