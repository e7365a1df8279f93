package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// PEFT names and fixed values of an exported adapter.
const (
	peftPrefix  = "base_model.model."
	peftSuffixA = ".lora_A.weight"
	peftSuffixB = ".lora_B.weight"
)

// peftAdapterConfig is the adapter_config.json ExportPEFT writes: what
// PeftModel.from_pretrained needs to mount it on transformers' DiffusionGemmaForBlockDiffusion.
type peftAdapterConfig struct {
	PeftType  string  `json:"peft_type"`
	TaskType  *string `json:"task_type"` // null: PEFT's causal-LM wrapper needs a generation API DiffusionGemma lacks
	BaseModel string  `json:"base_model_name_or_path"`
	R         int     `json:"r"`
	LoRAAlpha float64 `json:"lora_alpha"`
	// LoRADropout is the training dropout (PEFT applies it only in training mode).
	LoRADropout float64 `json:"lora_dropout"`
	// TargetModules is a regex PEFT full-matches against module names, matching exactly the
	// exported linears; a list of names would also match the vision tower's
	// Gemma4ClippableLinear q_proj etc., which PEFT refuses.
	TargetModules     string `json:"target_modules"`
	LayersToTransform []int  `json:"layers_to_transform"`
	Bias              string `json:"bias"`
	FanInFanOut       bool   `json:"fan_in_fan_out"`
	UseRSLoRA         bool   `json:"use_rslora"`
	InferenceMode     bool   `json:"inference_mode"`
	InitLoRAWeights   bool   `json:"init_lora_weights"`
}

// ExportPEFT writes f in HF PEFT's layout to dir: adapter_model.safetensors with
// "base_model.model.<module>.lora_A.weight" = Aᵀ [r, in] and ".lora_B.weight" = Bᵀ [out, r]
// (f32), and adapter_config.json with lora_alpha = scale·r, so PEFT's alpha/r gives back
// the scale. transformers runs the encoder pass through modules of its own
// (model.encoder.language_model.layers.N, sharing the decoder's weights), so a shared
// adapter is written under both module names with the same values, and a separate one with
// each pass's own weights; target_modules is a regex naming exactly the written modules.
func ExportPEFT(f *AdapterFile, dir, baseModel string) error {
	fail := func(err error) error { return fmt.Errorf("lora: export peft to %s: %w", dir, err) }
	if err := f.Validate(); err != nil {
		return fail(err)
	}
	modules := PEFTModules(f)
	arrays := make(map[string]*mx.Array, 2*len(modules))
	names := make([]string, 0, len(modules))
	for _, pm := range modules {
		arrays[peftPrefix+pm.Name+peftSuffixA] = mx.AsType(mx.Transpose(pm.W.A), mx.Float32)
		arrays[peftPrefix+pm.Name+peftSuffixB] = mx.AsType(mx.Transpose(pm.W.B), mx.Float32)
		names = append(names, pm.Name)
	}
	cfg := peftAdapterConfig{
		PeftType: "LORA", BaseModel: baseModel,
		R: f.Rank(), LoRAAlpha: f.Scale() * float64(f.Rank()), LoRADropout: f.Config.LoRAParameters.Dropout,
		TargetModules: PEFTTargetRegex(names), Bias: "none", InferenceMode: true, InitLoRAWeights: true,
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	if err := mx.SaveSafetensors(filepath.Join(dir, PEFTWeightsFile), arrays, map[string]string{"format": "pt"}); err != nil {
		return fail(err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ConfigFile), append(b, '\n')); err != nil {
		return fail(err)
	}
	return nil
}

// PEFTModule is one module of a PEFT export: its transformers module name and weights.
type PEFTModule struct {
	Name string
	W    Weights
}

// PEFTModules lists the modules ExportPEFT writes, in model order: f's modules, and for a
// shared adapter each decoder-layer module's encoder-pass copy too.
func PEFTModules(f *AdapterFile) []PEFTModule {
	var out []PEFTModule
	sep := f.Separate()
	for _, mod := range f.ModuleNames() {
		out = append(out, PEFTModule{mod, f.Modules[mod]})
		if enc, ok := diffusiongemma.EncoderModule(mod); ok && !sep {
			out = append(out, PEFTModule{enc, f.Modules[mod]})
		}
	}
	slices.SortStableFunc(out, func(a, b PEFTModule) int { return moduleLess(a.Name, b.Name) })
	return out
}

// PEFTTargetRegex returns a regular expression that full-matches exactly the given module
// names (PEFT's rule for a string target_modules): per layer key, the passes and layers
// that have it, e.g. ^(?:model\.(?:decoder|encoder\.language_model)\.layers\.(?:0|1)\.self_attn\.q_proj|...)$.
func PEFTTargetRegex(modules []string) string {
	passPrefix := map[string]string{
		diffusiongemma.DecoderPrefix + ".layers.": "decoder",
		diffusiongemma.EncoderLayersPrefix + ".":  `encoder\.language_model`,
	}
	type loc struct{ pass, key string }
	layers := map[loc][]int{}
	var keys, others []string
	for _, mod := range modules {
		n, key, ok := splitLayerModule(mod)
		if !ok {
			others = append(others, regexp.QuoteMeta(mod))
			continue
		}
		pass := passPrefix[diffusiongemma.DecoderPrefix+".layers."]
		if _, isEnc := diffusiongemma.DecoderModule(mod); isEnc {
			pass = passPrefix[diffusiongemma.EncoderLayersPrefix+"."]
		}
		l := loc{pass, key}
		if !slices.Contains(layers[l], n) {
			layers[l] = append(layers[l], n)
		}
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	slices.SortStableFunc(keys, func(a, b string) int { return keyIndex(a) - keyIndex(b) })
	var alts []string
	for _, key := range keys {
		// Passes with the same layer list share one alternative.
		byLayers := map[string][]string{}
		var order []string
		for _, pass := range []string{"decoder", `encoder\.language_model`} {
			ls := layers[loc{pass, key}]
			if len(ls) == 0 {
				continue
			}
			slices.Sort(ls)
			parts := make([]string, len(ls))
			for i, n := range ls {
				parts[i] = strconv.Itoa(n)
			}
			sig := strings.Join(parts, "|")
			if _, seen := byLayers[sig]; !seen {
				order = append(order, sig)
			}
			byLayers[sig] = append(byLayers[sig], pass)
		}
		for _, sig := range order {
			alts = append(alts, fmt.Sprintf(`model\.(?:%s)\.layers\.(?:%s)\.%s`, strings.Join(byLayers[sig], "|"), sig, regexp.QuoteMeta(key)))
		}
	}
	alts = append(alts, others...)
	return "^(?:" + strings.Join(alts, "|") + ")$"
}

// Merge combines two adapters into one by concatenating along the rank axis, pass by pass
// (the result is separate when either adapter is):
// A_m = [A1 | A2] [in, r1+r2], B_m = [s1·B1 ; s2·B2] [r1+r2, out], scale 1, so that
// x·A_m·B_m = s1·x·A1·B1 + s2·x·A2·B2 exactly. A module present in only one adapter gets
// zero columns (and rows) in place of the other's, which add nothing and keep one rank
// across the file.
func Merge(a, b *AdapterFile) (*AdapterFile, error) {
	if a == nil || b == nil {
		return nil, errors.New("lora: merge: need two adapters")
	}
	for i, f := range []*AdapterFile{a, b} {
		if err := f.Validate(); err != nil {
			return nil, fmt.Errorf("lora: merge: adapter %d: %w", i+1, err)
		}
	}
	var e mx.Engine
	for _, f := range []*AdapterFile{a, b} {
		for _, w := range f.Modules {
			if e == nil {
				e = w.A.Engine()
			}
			if w.A.Engine() != e || w.B.Engine() != e {
				return nil, errors.New("lora: merge: the adapters' arrays are on different engines")
			}
		}
	}
	// A shared adapter acts in both passes; merged with a separate one, it must say so
	// module by module.
	sep := a.Separate() || b.Separate()
	if sep {
		a, b = a.withEncoderCopies(), b.withEncoderCopies()
	}
	r1, r2 := a.Rank(), b.Rank()
	s1, s2 := a.Scale(), b.Scale()
	modules := a.ModuleNames()
	for _, m := range b.ModuleNames() {
		if _, ok := a.Modules[m]; !ok {
			modules = append(modules, m)
		}
	}
	slices.SortFunc(modules, moduleLess)
	out := &AdapterFile{Modules: map[string]Weights{}}
	var problems []string
	for _, mod := range modules {
		w1, in1 := a.Modules[mod]
		w2, in2 := b.Modules[mod]
		var in, outDim int
		switch {
		case in1 && in2:
			in, outDim = w1.A.Dim(0), w1.B.Dim(1)
			if w2.A.Dim(0) != in || w2.B.Dim(1) != outDim {
				problems = append(problems, fmt.Sprintf("%s: adapter 1 is [%d, %d] (in, out), adapter 2 [%d, %d]",
					mod, in, outDim, w2.A.Dim(0), w2.B.Dim(1)))
				continue
			}
		case in1:
			in, outDim = w1.A.Dim(0), w1.B.Dim(1)
		default:
			in, outDim = w2.A.Dim(0), w2.B.Dim(1)
		}
		half := func(w Weights, present bool, r int, s float64) (*mx.Array, *mx.Array) {
			if !present {
				return mx.Zeros(e, []int{in, r}, mx.Float32), mx.Zeros(e, []int{r, outDim}, mx.Float32)
			}
			return mx.AsType(w.A, mx.Float32), mx.MulScalar(mx.AsType(w.B, mx.Float32), s)
		}
		a1, b1 := half(w1, in1, r1, s1)
		a2, b2 := half(w2, in2, r2, s2)
		out.Modules[mod] = Weights{A: mx.Concatenate([]*mx.Array{a1, a2}, 1), B: mx.Concatenate([]*mx.Array{b1, b2}, 0)}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("lora: merge: the adapters disagree on module shapes:\n  %s", strings.Join(problems, "\n  "))
	}
	base := a.Config.BaseModel
	if base == "" {
		base = b.Config.BaseModel
	}
	numLayers := -1
	if a.Config.NumLayers > 0 && b.Config.NumLayers > 0 {
		numLayers = max(a.Config.NumLayers, b.Config.NumLayers)
	}
	out.Config = AdapterConfig{FineTuneType: FineTuneTypeLoRA, ModelType: ModelType, BaseModel: base, NumLayers: numLayers,
		LoRAParameters: LoRAParameters{Rank: r1 + r2, Scale: 1, Keys: out.Keys()}}
	if sep {
		out.Config.LoRAParameters.Encoder = EncoderModeSeparate
	}
	return out, nil
}

// withEncoderCopies returns f as a separate adapter: a shared one gets each decoder-layer
// module's weights under its encoder-pass name as well (the arrays are shared, not copied).
func (f *AdapterFile) withEncoderCopies() *AdapterFile {
	if f.Separate() {
		return f
	}
	c := *f
	c.Modules = maps.Clone(f.Modules)
	for mod, w := range f.Modules {
		if enc, ok := diffusiongemma.EncoderModule(mod); ok {
			c.Modules[enc] = w
		}
	}
	c.Config.LoRAParameters.Encoder = EncoderModeSeparate
	return &c
}
