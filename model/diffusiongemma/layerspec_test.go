package diffusiongemma

import (
	"slices"
	"sort"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// Every row of the tensor table reaches the field Build filled: the tensor under the row's
// name is the one its slot holds (same array for dense tensors, same packed codes for
// quantized ones), for an unquantized and a 4-bit tiny model.
func TestTensorTableSlotsHoldTheirTensors(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		for _, bits := range []string{BitsNone, Bits4} {
			m, w := synthModel(t, e, PresetTiny, bits, 3)
			tc := &m.Config.TextConfig
			n := 0
			for r := range textTensors(tc, tc.NumHiddenLayers) {
				n++
				s := r.def.slot(m, r.layer)
				var got *mx.Array
				switch r.def.kind {
				case KindParam:
					got = *s.array
				case KindLinear:
					switch l := (*s.linear).(type) {
					case *Dense:
						got = l.W
					case *Quantized:
						got = l.W
					}
				case KindEmbedding:
					if got = (*s.embed).Dense; got == nil {
						got = (*s.embed).Quant.W
					}
				case KindExperts:
					if got = (*s.experts).Dense; got == nil {
						got = (*s.experts).Quant.W
					}
				}
				if got == nil {
					t.Fatalf("%s %s: slot is empty", bits, r.name)
				}
				want := w[r.name]
				if !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(got.Float32s(), mx.AsType(want, got.DType()).Float32s()) {
					t.Errorf("%s %s: slot holds shape %v, checkpoint %v (or other values)", bits, r.name, got.Shape(), want.Shape())
				}
			}
			if want := len(ExpectedTensors(m.Config)); n != want {
				t.Errorf("%s: table yields %d tensors, ExpectedTensors %d", bits, n, want)
			}
		}
	})
}

// DenseTensors names exactly the unquantized tensors of ExpectedTensors, and LinearSlot
// finds every 2-D linear of the table and nothing else.
func TestDenseTensorsAndLinearSlotFollowTheTable(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		for _, tt := range []struct {
			bits    string
			quantOK bool // quantized tensors are left out of DenseTensors
		}{{BitsNone, false}, {Bits4, true}} {
			m, _ := synthModel(t, e, PresetTiny, tt.bits, 3)
			var want []string
			for _, ts := range ExpectedTensors(m.Config) {
				if _, _, q := quantFor(m.Config, ts); !q {
					want = append(want, ts.Name)
				}
				if ts.Kind != KindLinear {
					if _, err := m.LinearSlot(ts.Module); err == nil {
						t.Errorf("%s: LinearSlot(%s) found a linear for a %v tensor", tt.bits, ts.Module, ts.Kind)
					}
					continue
				}
				slot, err := m.LinearSlot(ts.Module)
				if err != nil {
					t.Fatalf("%s: LinearSlot(%s): %v", tt.bits, ts.Module, err)
				}
				if in, out := (*slot).Dims(); in != ts.Shape[1] || out != ts.Shape[0] {
					t.Errorf("%s: LinearSlot(%s) dims in %d out %d, want %v", tt.bits, ts.Module, in, out, ts.Shape)
				}
			}
			var got []string
			for name := range m.DenseTensors() {
				got = append(got, name)
			}
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: DenseTensors names %d tensors, want %d:\n got %v\nwant %v", tt.bits, len(got), len(want), got, want)
			}
			if tt.quantOK == (len(want) == len(ExpectedTensors(m.Config))) {
				t.Errorf("%s: %d of %d tensors dense", tt.bits, len(want), len(ExpectedTensors(m.Config)))
			}
		}
	})
}

func quantFor(cfg *Config, ts TensorSpec) (int, int, bool) {
	if cfg.Quantization == nil || !ts.Quantizable {
		return 0, 0, false
	}
	return cfg.Quantization.For(ts.Module)
}

func TestLinearSlotErrors(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		m, _ := synthModel(t, e, PresetTiny, BitsNone, 3)
		full := -1
		for i := range m.Layers {
			if !m.Config.TextConfig.HasVProj(i) {
				full = i
			}
		}
		if full < 0 {
			t.Fatal("tiny preset has no layer without v_proj")
		}
		for _, tt := range []struct{ module, want string }{
			{"model.decoder.embed_tokens", `diffusiongemma: no linear "model.decoder.embed_tokens"`},
			{"model.decoder.self_conditioning.pre_norm", `diffusiongemma: no linear "model.decoder.self_conditioning.pre_norm"`},
			{"model.decoder.layers.9.self_attn.q_proj", `diffusiongemma: no linear "model.decoder.layers.9.self_attn.q_proj" (model has 2 layers)`},
			{"model.decoder.layers.x.self_attn.q_proj", `diffusiongemma: no linear "model.decoder.layers.x.self_attn.q_proj" (model has 2 layers)`},
			{"model.decoder.layers.0.input_layernorm", `diffusiongemma: no linear "model.decoder.layers.0.input_layernorm"`},
			{"model.decoder.layers.0.experts.down_proj", `diffusiongemma: no linear "model.decoder.layers.0.experts.down_proj"`},
			{LayerPrefix(full) + ".self_attn.v_proj", `diffusiongemma: no linear "` + LayerPrefix(full) + `.self_attn.v_proj"`},
		} {
			if _, err := m.LinearSlot(tt.module); err == nil || err.Error() != tt.want {
				t.Errorf("LinearSlot(%s) = %v, want %s", tt.module, err, tt.want)
			}
		}
	})
}

// The LoRA keys come from the table's rows in table order.
func TestLoRAKeysFromTable(t *testing.T) {
	def := []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}
	if got := DefaultLoRAKeys(); !slices.Equal(got, def) {
		t.Errorf("DefaultLoRAKeys = %v, want %v", got, def)
	}
	if got, want := LoRAKeys(), append(slices.Clone(def), "router.proj"); !slices.Equal(got, want) {
		t.Errorf("LoRAKeys = %v, want %v", got, want)
	}
}
