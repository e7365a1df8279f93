package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// Weights are one module's adapter tensors in the canonical (mlx-lm) orientation:
// A [in, r], B [r, out].
type Weights struct {
	A, B *mx.Array
}

// AdapterFile is an adapter read from disk (or built in memory), independent of its
// on-disk layout: tensors by module path in the canonical orientation, and the resolved
// config (rank and scale always set).
type AdapterFile struct {
	Config AdapterConfig
	// Modules maps module paths to weights: "model.decoder.layers.N.<key>", and for an
	// adapter whose encoder pass has weights of its own (Separate) also
	// "model.encoder.language_model.layers.N.<key>".
	Modules map[string]Weights
	Path    string // the tensor file read, "" when built in memory
	// TargetModules is a PEFT adapter_config.json's target_modules as written (a regex string
	// or a list of names), nil for other adapters; Mount checks it names linears of the model.
	TargetModules json.RawMessage
}

// Rank returns r.
func (f *AdapterFile) Rank() int { return f.Config.LoRAParameters.Rank }

// Separate reports whether the encoder pass has weights of its own: the config says
// encoder "separate", or the file holds encoder-pass modules
// ("model.encoder.language_model.layers.N.<key>"). A module without encoder-pass weights then
// acts in the decoder pass only. Otherwise each module acts in both passes (optiq).
func (f *AdapterFile) Separate() bool {
	if f.Config.LoRAParameters.Encoder == EncoderModeSeparate {
		return true
	}
	for mod := range f.Modules {
		if _, ok := diffusiongemma.DecoderModule(mod); ok {
			return true
		}
	}
	return false
}

// slotModules lists, in model order, the model linears the file's modules act on.
func (f *AdapterFile) slotModules() []string {
	var out []string
	for _, mod := range f.ModuleNames() {
		if s := slotModule(mod); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Scale returns the factor applied to x·A·B.
func (f *AdapterFile) Scale() float64 { return f.Config.LoRAParameters.Scale }

// ModuleNames lists the modules in model order.
func (f *AdapterFile) ModuleNames() []string {
	names := slices.Collect(maps.Keys(f.Modules))
	slices.SortFunc(names, moduleLess)
	return names
}

// Keys lists the distinct layer keys the modules use (canonical order), and the full path
// of any module outside the decoder layers.
func (f *AdapterFile) Keys() []string {
	var keys []string
	for _, mod := range f.ModuleNames() {
		k := mod
		if _, key, ok := splitLayerModule(mod); ok {
			k = key
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.SortStableFunc(keys, func(a, b string) int { return keyIndex(a) - keyIndex(b) })
	return keys
}

// Validate checks the file on its own: every module has a 2-D float A [in, r] and
// B [r, out] at the declared rank. All problems are listed.
func (f *AdapterFile) Validate() error {
	r := f.Rank()
	var problems []string
	if r < 1 {
		problems = append(problems, fmt.Sprintf("rank %d must be at least 1", r))
	}
	if s := f.Scale(); math.IsNaN(s) || math.IsInf(s, 0) {
		problems = append(problems, fmt.Sprintf("scale %v must be finite", s))
	}
	if len(f.Modules) == 0 {
		problems = append(problems, "no adapter tensors")
	}
	for _, mod := range f.ModuleNames() {
		w := f.Modules[mod]
		for _, c := range []struct {
			name string
			arr  *mx.Array
			rAx  int
		}{{mod + suffixA, w.A, 1}, {mod + suffixB, w.B, 0}} {
			switch {
			case c.arr == nil:
				problems = append(problems, fmt.Sprintf("%s: missing", c.name))
			case c.arr.Ndim() != 2:
				problems = append(problems, fmt.Sprintf("%s: shape %v, want 2-D", c.name, c.arr.Shape()))
			case !c.arr.DType().IsFloat():
				problems = append(problems, fmt.Sprintf("%s: dtype %s, want a float type", c.name, c.arr.DType()))
			case r >= 1 && c.arr.Dim(c.rAx) != r:
				want := "[in, r]"
				if c.rAx == 0 {
					want = "[r, out]"
				}
				problems = append(problems, fmt.Sprintf("%s: shape %v, want %s with r = %d (the config's rank)", c.name, c.arr.Shape(), want, r))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrFormat, strings.Join(problems, "; "))
	}
	return nil
}

// Save writes dir/adapters.safetensors: every parameter as f32 under its mlx-lm/optiq name.
// extra goes into the safetensors header metadata next to "format": "mlx" (strings as they
// are, other values JSON-encoded). adapter_config.json is WriteConfig's job.
func Save(dir string, a *Adapter, extra map[string]any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lora: save: %w", err)
	}
	return SaveTensors(filepath.Join(dir, AdaptersFile), a, extra)
}

// SaveTensors is Save to an explicit file name (checkpoints such as
// 0000100_adapters.safetensors or best_adapters.safetensors).
func SaveTensors(path string, a *Adapter, extra map[string]any) error {
	if err := writeTensors(path, a.File(""), extra); err != nil {
		return fmt.Errorf("lora: save: %w", err)
	}
	return nil
}

// Write writes f in the mlx-lm/optiq layout: dir/adapters.safetensors and
// dir/adapter_config.json.
func (f *AdapterFile) Write(dir string) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("lora: write %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lora: write: %w", err)
	}
	if err := writeTensors(filepath.Join(dir, AdaptersFile), f, nil); err != nil {
		return fmt.Errorf("lora: write: %w", err)
	}
	ac := f.Config
	if len(ac.LoRAParameters.Keys) == 0 {
		ac.LoRAParameters.Keys = f.Keys()
	}
	return WriteConfig(dir, ac)
}

func writeTensors(path string, f *AdapterFile, extra map[string]any) error {
	meta := map[string]string{"format": "mlx"}
	for k, v := range extra {
		if k == "format" {
			return fmt.Errorf("metadata key %q is reserved", k)
		}
		if s, ok := v.(string); ok {
			meta[k] = s
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("metadata %q: %w", k, err)
		}
		meta[k] = string(b)
	}
	arrays := make(map[string]*mx.Array, 2*len(f.Modules))
	for mod, w := range f.Modules {
		arrays[mod+suffixA] = mx.AsType(w.A, mx.Float32)
		arrays[mod+suffixB] = mx.AsType(w.B, mx.Float32)
	}
	return mx.SaveSafetensors(path, arrays, meta)
}

// LoadDir reads the adapter in dir: adapters.safetensors (mlx-lm/optiq), or else
// adapter_model.safetensors (PEFT), with the configs beside it.
func LoadDir(e mx.Engine, dir string) (*AdapterFile, error) {
	for _, name := range []string{AdaptersFile, PEFTWeightsFile} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return LoadFile(e, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("lora: load %s: %w", dir, err)
		}
	}
	return nil, fmt.Errorf("lora: load %s: %w: neither %s nor %s exists", dir, ErrFormat, AdaptersFile, PEFTWeightsFile)
}

// LoadFile reads one adapter tensor file onto e; adapter_config.json and/or
// optiq_lora_config.json in the same directory give rank and scale. Tensor names may be
// mlx-lm's "<module>.lora_a" [in, r] / ".lora_b" [r, out] or PEFT's
// "base_model.model.<module>.lora_A.weight" [r, in] / ".lora_B.weight" [out, r] (with or
// without the "base_model.model." prefix, and with "language_model." prefixed module
// paths); PEFT tensors are transposed to the canonical orientation and everything is
// converted to f32.
func LoadFile(e mx.Engine, path string) (*AdapterFile, error) {
	fail := func(err error) (*AdapterFile, error) { return nil, fmt.Errorf("lora: load %s: %w", path, err) }
	cfg, targets, err := readConfigs(filepath.Dir(path))
	if err != nil {
		return fail(err)
	}
	tensors, _, err := mx.LoadSafetensors(e, path)
	if err != nil {
		return fail(err)
	}
	f := &AdapterFile{Modules: map[string]Weights{}, Path: path, TargetModules: targets}
	var problems []string
	peftLayout := false
	source := map[string]string{} // canonical name → file name, to catch two spellings of one tensor
	for _, name := range slices.Sorted(maps.Keys(tensors)) {
		module, isB, peft, ok := parseTensorName(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("tensor %q is not a LoRA tensor (want <module>.lora_a/.lora_b or <module>.lora_A.weight/.lora_B.weight)", name))
			continue
		}
		canon := module + suffixA
		if isB {
			canon = module + suffixB
		}
		if prev, dup := source[canon]; dup {
			problems = append(problems, fmt.Sprintf("tensors %q and %q are both %s", prev, name, canon))
			continue
		}
		source[canon] = name
		arr := tensors[name]
		if arr.Ndim() != 2 {
			problems = append(problems, fmt.Sprintf("tensor %q has shape %v, want 2-D", name, arr.Shape()))
			continue
		}
		if !arr.DType().IsFloat() {
			problems = append(problems, fmt.Sprintf("tensor %q has dtype %s, want a float type", name, arr.DType()))
			continue
		}
		if peft {
			arr = mx.Transpose(arr)
			peftLayout = true
		}
		arr = mx.AsType(arr, mx.Float32)
		w := f.Modules[module]
		if isB {
			w.B = arr
		} else {
			w.A = arr
		}
		f.Modules[module] = w
	}
	if len(problems) > 0 {
		return fail(fmt.Errorf("%w: %s", ErrFormat, strings.Join(problems, "; ")))
	}
	if cfg.LoRAParameters.Rank == 0 {
		// No config states the rank: take it from the tensors (Validate checks they agree).
		for _, mod := range f.ModuleNames() {
			if a := f.Modules[mod].A; a != nil {
				cfg.LoRAParameters.Rank = a.Dim(1)
				break
			}
		}
	}
	if len(cfg.LoRAParameters.Keys) == 0 {
		cfg.LoRAParameters.Keys = f.Keys()
	}
	f.Config = cfg
	if err := f.Validate(); err != nil {
		return fail(err)
	}
	if err := f.resolveEncoder(peftLayout); err != nil {
		return fail(err)
	}
	return f, nil
}

// resolveEncoder settles what the encoder pass uses. An mlx-lm/optiq file holds decoder
// modules that act in both passes, unless it also holds encoder-pass modules (then it is
// separate). A PEFT file was made on transformers, whose encoder layers are modules of their
// own: without encoder keys the encoder pass is not adapted (separate, with no encoder
// weights); with encoder keys equal to the decoder's everywhere it is one shared adapter;
// otherwise the two passes use their own weights.
func (f *AdapterFile) resolveEncoder(peftLayout bool) error {
	p := &f.Config.LoRAParameters
	var enc []string
	for _, mod := range f.ModuleNames() {
		if _, ok := diffusiongemma.DecoderModule(mod); ok {
			enc = append(enc, mod)
		}
	}
	if p.Encoder == EncoderModeShared && len(enc) > 0 {
		return fmt.Errorf("%w: adapter_config.json says encoder %q but the file holds encoder-pass weights (%s, ...)", ErrFormat, EncoderModeShared, enc[0])
	}
	if !peftLayout {
		if len(enc) > 0 {
			p.Encoder = EncoderModeSeparate
		}
		return nil
	}
	if len(enc) > 0 && f.encoderEqualsDecoder(enc) {
		for _, mod := range enc {
			delete(f.Modules, mod)
		}
		p.Encoder = ""
		return nil
	}
	p.Encoder = EncoderModeSeparate
	return nil
}

// encoderEqualsDecoder reports whether the encoder-pass modules enc pair off exactly with
// the decoder-layer modules, with bit-identical weights.
func (f *AdapterFile) encoderEqualsDecoder(enc []string) bool {
	decoderLayer := 0
	for mod := range f.Modules {
		if _, ok := diffusiongemma.EncoderModule(mod); ok {
			decoderLayer++
		}
	}
	if decoderLayer != len(enc) {
		return false
	}
	for _, e := range enc {
		d, _ := diffusiongemma.DecoderModule(e)
		we, wd := f.Modules[e], f.Modules[d]
		if wd.A == nil || !slices.Equal(we.A.Shape(), wd.A.Shape()) || !slices.Equal(we.B.Shape(), wd.B.Shape()) ||
			!slices.Equal(we.A.Float32s(), wd.A.Float32s()) || !slices.Equal(we.B.Float32s(), wd.B.Float32s()) {
			return false
		}
	}
	return true
}

// parseTensorName maps a file's tensor name to its canonical module path, whether it is B,
// and whether it uses PEFT's orientation (names ending in ".weight").
func parseTensorName(name string) (module string, isB, peft, ok bool) {
	n := strings.TrimPrefix(name, "base_model.model.")
	n = strings.TrimPrefix(n, "language_model.")
	if rest, found := strings.CutPrefix(n, "model.language_model."); found {
		n = diffusiongemma.DecoderPrefix + "." + rest
	}
	n, peft = strings.CutSuffix(n, ".weight")
	i := strings.LastIndex(n, ".")
	if i <= 0 {
		return "", false, false, false
	}
	switch n[i+1:] {
	case "lora_a", "lora_A":
	case "lora_b", "lora_B":
		isB = true
	default:
		return "", false, false, false
	}
	return n[:i], isB, peft, true
}

// peftConfig holds the HF PEFT fields of adapter_config.json that matter here.
type peftConfig struct {
	PeftType     string          `json:"peft_type"`
	R            *int            `json:"r"`
	LoRAAlpha    *float64        `json:"lora_alpha"`
	UseRSLoRA    bool            `json:"use_rslora"`
	LoRADropout  float64         `json:"lora_dropout"`
	BaseModel    string          `json:"base_model_name_or_path"`
	RankPattern  map[string]any  `json:"rank_pattern"`
	AlphaPattern map[string]any  `json:"alpha_pattern"`
	UseDoRA      bool            `json:"use_dora"`
	TargetRaw    json.RawMessage `json:"target_modules"`
}

// peftKeys are PEFT's config keys: dropped from Extra so that a PEFT adapter re-written in
// the mlx layout does not carry stale r/lora_alpha values.
var peftKeys = []string{"peft_type", "r", "lora_alpha", "use_rslora", "lora_dropout", "base_model_name_or_path",
	"rank_pattern", "alpha_pattern", "use_dora", "target_modules", "task_type", "bias", "fan_in_fan_out",
	"inference_mode", "init_lora_weights", "modules_to_save", "layers_to_transform", "layers_pattern",
	"revision", "auto_mapping", "megatron_config", "megatron_core", "optiq"}

// optiqConfig is mlx-bun's optiq_lora_config.json (only the fields read).
type optiqConfig struct {
	Rank           *int     `json:"rank"`
	Scale          *float64 `json:"scale"`
	NumLayers      *int     `json:"num_layers"`
	LoRAParameters *struct {
		Rank  *int     `json:"rank"`
		Scale *float64 `json:"scale"`
	} `json:"lora_parameters"`
}

// readConfigs resolves rank, scale, dropout, keys and the base model from dir's
// adapter_config.json and optiq_lora_config.json (at least one must exist). Scale, in order:
// optiq_lora_config's lora_parameters.scale or scale; adapter_config's lora_parameters.scale;
// PEFT lora_alpha/r (lora_alpha/√r with use_rslora); mlx-lm's default 20 when
// lora_parameters exists without a scale.
func readConfigs(dir string) (AdapterConfig, json.RawMessage, error) {
	ac, peft, err := readConfigFiles(dir)
	if err != nil {
		return ac, nil, err
	}
	var targets json.RawMessage
	if len(peft.TargetRaw) > 0 && string(peft.TargetRaw) != "null" {
		targets = peft.TargetRaw
	}
	return ac, targets, nil
}

func readConfigFiles(dir string) (AdapterConfig, peftConfig, error) {
	var none AdapterConfig
	var peft peftConfig
	acRaw, errA := readOptional(filepath.Join(dir, ConfigFile))
	oqRaw, errO := readOptional(filepath.Join(dir, OptiqConfigFile))
	if err := errors.Join(errA, errO); err != nil {
		return none, peft, err
	}
	if acRaw == nil && oqRaw == nil {
		return none, peft, fmt.Errorf("%w: neither %s nor %s in %s", ErrFormat, ConfigFile, OptiqConfigFile, dir)
	}
	var ac AdapterConfig
	var lp map[string]json.RawMessage
	if acRaw != nil {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(acRaw, &top); err != nil {
			return none, peft, fmt.Errorf("%s: %w", ConfigFile, err)
		}
		if err := json.Unmarshal(acRaw, &ac); err != nil {
			return none, peft, fmt.Errorf("%s: %w", ConfigFile, err)
		}
		if err := json.Unmarshal(acRaw, &peft); err != nil {
			return none, peft, fmt.Errorf("%s: PEFT fields: %w", ConfigFile, err)
		}
		if raw, ok := top["lora_parameters"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &lp); err != nil {
				return none, peft, fmt.Errorf("%s: lora_parameters: %w", ConfigFile, err)
			}
		}
	}
	var oq optiqConfig
	if oqRaw != nil {
		if err := json.Unmarshal(oqRaw, &oq); err != nil {
			return none, peft, fmt.Errorf("%s: %w", OptiqConfigFile, err)
		}
	}

	var problems []string
	if t := ac.FineTuneType; t != "" && t != FineTuneTypeLoRA {
		problems = append(problems, fmt.Sprintf("fine_tune_type %q is not supported (want %q)", t, FineTuneTypeLoRA))
	}
	if t := peft.PeftType; t != "" && t != "LORA" {
		problems = append(problems, fmt.Sprintf("peft_type %q is not supported (want \"LORA\")", t))
	}
	if peft.UseDoRA {
		problems = append(problems, "use_dora is not supported")
	}
	if len(peft.RankPattern) > 0 || len(peft.AlphaPattern) > 0 {
		problems = append(problems, "per-module rank_pattern/alpha_pattern is not supported")
	}

	out := AdapterConfig{FineTuneType: FineTuneTypeLoRA, ModelType: ModelType, BaseModel: ac.BaseModel,
		NumLayers: ac.NumLayers, LoRAParameters: ac.LoRAParameters, Extra: ac.Extra}
	for _, k := range peftKeys {
		delete(out.Extra, k)
	}
	if len(out.Extra) == 0 {
		out.Extra = nil
	}
	if out.BaseModel == "" {
		out.BaseModel = peft.BaseModel
	}
	if out.NumLayers == 0 && oq.NumLayers != nil {
		out.NumLayers = *oq.NumLayers
	}
	p := &out.LoRAParameters
	_, hasLPRank := lp["rank"]
	_, hasLPScale := lp["scale"]
	_, hasLPDropout := lp["dropout"]
	switch {
	case hasLPRank && p.Rank > 0:
	case oq.LoRAParameters != nil && oq.LoRAParameters.Rank != nil:
		p.Rank = *oq.LoRAParameters.Rank
	case oq.Rank != nil:
		p.Rank = *oq.Rank
	case peft.R != nil:
		p.Rank = *peft.R
	}
	switch {
	case oq.LoRAParameters != nil && oq.LoRAParameters.Scale != nil:
		p.Scale = *oq.LoRAParameters.Scale
	case oq.Scale != nil:
		p.Scale = *oq.Scale
	case hasLPScale:
	case peft.R != nil:
		if *peft.R < 1 {
			problems = append(problems, fmt.Sprintf("r %d must be at least 1", *peft.R))
			break
		}
		alpha := 8.0 // PEFT's default lora_alpha
		if peft.LoRAAlpha != nil {
			alpha = *peft.LoRAAlpha
		}
		if peft.UseRSLoRA {
			p.Scale = alpha / math.Sqrt(float64(*peft.R))
		} else {
			p.Scale = alpha / float64(*peft.R)
		}
	case lp != nil:
		p.Scale = DefaultMLXScale
	default:
		problems = append(problems, "no scale: want lora_parameters.scale or PEFT r and lora_alpha")
	}
	if !hasLPDropout && lp == nil {
		p.Dropout = peft.LoRADropout
	}
	if len(problems) > 0 {
		return none, peft, fmt.Errorf("%w: %s", ErrFormat, strings.Join(problems, "; "))
	}
	return out, peft, nil
}

// readOptional returns a file's bytes, or nil if it does not exist.
func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}
