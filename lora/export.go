package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// PEFT names and fixed values of an exported adapter.
const (
	peftPrefix  = "base_model.model."
	peftSuffixA = ".lora_A.weight"
	peftSuffixB = ".lora_B.weight"
)

// peftAdapterConfig is the adapter_config.json ExportPEFT writes.
type peftAdapterConfig struct {
	PeftType          string   `json:"peft_type"`
	TaskType          string   `json:"task_type"`
	BaseModel         string   `json:"base_model_name_or_path"`
	R                 int      `json:"r"`
	LoRAAlpha         float64  `json:"lora_alpha"`
	LoRADropout       float64  `json:"lora_dropout"`
	TargetModules     []string `json:"target_modules"`
	LayersToTransform []int    `json:"layers_to_transform,omitempty"`
	Bias              string   `json:"bias"`
	FanInFanOut       bool     `json:"fan_in_fan_out"`
	UseRSLoRA         bool     `json:"use_rslora"`
	InferenceMode     bool     `json:"inference_mode"`
}

// ExportPEFT writes f in HF PEFT's layout to dir: adapter_model.safetensors with
// "base_model.model.<module>.lora_A.weight" = Aᵀ [r, in] and ".lora_B.weight" = Bᵀ [out, r]
// (f32), and adapter_config.json with lora_alpha = scale·r, so PEFT's alpha/r gives back
// the scale. target_modules are the distinct keys' last components ("q_proj", ...);
// layers_to_transform is added when the adapter covers only its last num_layers layers.
func ExportPEFT(f *AdapterFile, dir, baseModel string) error {
	fail := func(err error) error { return fmt.Errorf("lora: export peft to %s: %w", dir, err) }
	if err := f.Validate(); err != nil {
		return fail(err)
	}
	arrays := make(map[string]*mx.Array, 2*len(f.Modules))
	var targets []string
	var layers []int
	for _, mod := range f.ModuleNames() {
		w := f.Modules[mod]
		arrays[peftPrefix+mod+peftSuffixA] = mx.AsType(mx.Transpose(w.A), mx.Float32)
		arrays[peftPrefix+mod+peftSuffixB] = mx.AsType(mx.Transpose(w.B), mx.Float32)
		last := mod[strings.LastIndex(mod, ".")+1:]
		if !slices.Contains(targets, last) {
			targets = append(targets, last)
		}
		if l, _, ok := splitLayerModule(mod); ok && !slices.Contains(layers, l) {
			layers = append(layers, l)
		}
	}
	cfg := peftAdapterConfig{
		PeftType: "LORA", TaskType: "CAUSAL_LM", BaseModel: baseModel,
		R: f.Rank(), LoRAAlpha: f.Scale() * float64(f.Rank()), LoRADropout: f.Config.LoRAParameters.Dropout,
		TargetModules: targets, Bias: "none", InferenceMode: true,
	}
	if f.Config.NumLayers > 0 {
		slices.Sort(layers)
		cfg.LayersToTransform = layers
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

// Merge combines two adapters into one by concatenating along the rank axis:
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
	return out, nil
}
