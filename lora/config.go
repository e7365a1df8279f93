package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/model/diffusiongemma"
)

// Adapter file names and fixed config values (diffusiongemma.md §6.1, §6.2).
const (
	AdaptersFile    = "adapters.safetensors"      // mlx-lm / optiq tensors
	PEFTWeightsFile = "adapter_model.safetensors" // HF PEFT tensors
	ConfigFile      = "adapter_config.json"
	OptiqConfigFile = "optiq_lora_config.json" // mlx-bun's extra config, optional

	FineTuneTypeLoRA = "lora"
	ModelType        = "diffusion_gemma"

	// DefaultMLXScale is mlx-lm's scale when lora_parameters gives none.
	DefaultMLXScale = 20.0
)

// Config is what an adapter is built from: rank, scale, dropout, the layer keys it adapts
// and on how many of the last layers. In JSON it is mlx-lm's shape:
// {"num_layers": N, "lora_parameters": {"rank", "scale", "dropout", "keys"}}.
type Config struct {
	Rank    int
	Scale   float64
	Dropout float64
	// Keys are paths inside a decoder layer ("self_attn.q_proj", ...); empty means
	// diffusiongemma.DefaultLoRAKeys.
	Keys []string
	// NumLayers adapts the last NumLayers decoder layers; −1 or 0 mean all of them.
	NumLayers int
	// Encoder is EncoderModeShared ("" too: one set of weights acts in both passes, optiq's
	// semantics) or EncoderModeSeparate (the encoder pass has weights of its own).
	Encoder string
	// Init is how A is drawn: InitKaimingUniform ("" too), InitXavierNormal or InitGaussian
	// (see Attach). B is always 0.
	Init string
}

// LoRA initialisations of A (lora_parameters.init).
const (
	InitKaimingUniform = "kaiming_uniform" // U(±1/√in): PEFT's default (kaiming_uniform_, a = √5) and mlx-lm's
	InitXavierNormal   = "xavier_normal"   // N(0, 2/(in + r)): NeMo AutoModel's lora_A_init "xavier"
	InitGaussian       = "gaussian"        // N(0, 1/r²): PEFT's init_lora_weights="gaussian"
)

// Encoder modes of an adapter (lora_parameters.encoder).
const (
	EncoderModeShared   = "shared"
	EncoderModeSeparate = "separate"
)

// separate reports whether the encoder pass has weights of its own.
func (c Config) separate() bool { return c.Encoder == EncoderModeSeparate }

// DefaultConfig is optiq's recipe (§5.7): rank 8, scale 8, dropout 0, the seven attention
// and dense-MLP keys on all layers.
func DefaultConfig() Config {
	return Config{Rank: 8, Scale: 8, Keys: diffusiongemma.DefaultLoRAKeys(), NumLayers: -1}
}

// LoRAParameters is the "lora_parameters" object of adapter_config.json.
type LoRAParameters struct {
	Rank    int      `json:"rank"`
	Scale   float64  `json:"scale"`
	Dropout float64  `json:"dropout"`
	Keys    []string `json:"keys"`
	// Encoder is written only for "separate", so that a shared adapter's config stays
	// byte-compatible with optiq's.
	Encoder string `json:"encoder,omitempty"`
	// Init is written only when it is not the default kaiming_uniform, for the same reason.
	Init string `json:"init,omitempty"`
}

type configJSON struct {
	NumLayers      int            `json:"num_layers"`
	LoRAParameters LoRAParameters `json:"lora_parameters"`
}

// MarshalJSON writes mlx-lm's layout.
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(configJSON{NumLayers: c.NumLayers, LoRAParameters: c.params()})
}

// UnmarshalJSON reads mlx-lm's layout.
func (c *Config) UnmarshalJSON(b []byte) error {
	var j configJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("lora config: %w", err)
	}
	*c = Config{Rank: j.LoRAParameters.Rank, Scale: j.LoRAParameters.Scale, Dropout: j.LoRAParameters.Dropout,
		Keys: j.LoRAParameters.Keys, NumLayers: j.NumLayers, Encoder: j.LoRAParameters.Encoder, Init: j.LoRAParameters.Init}
	return nil
}

func (c Config) params() LoRAParameters {
	p := LoRAParameters{Rank: c.Rank, Scale: c.Scale, Dropout: c.Dropout, Keys: c.keys()}
	if c.separate() {
		p.Encoder = EncoderModeSeparate
	}
	if c.Init != InitKaimingUniform {
		p.Init = c.Init
	}
	return p
}

func (c Config) keys() []string {
	if len(c.Keys) == 0 {
		return diffusiongemma.DefaultLoRAKeys()
	}
	return slices.Clone(c.Keys)
}

func (c Config) numLayers() int {
	if c.NumLayers == 0 {
		return -1
	}
	return c.NumLayers
}

// Validate checks the values that do not depend on a model; keys and num_layers are
// checked against the model by Attach.
func (c Config) Validate() error {
	var p []string
	if c.Rank < 1 {
		p = append(p, fmt.Sprintf("rank %d must be at least 1", c.Rank))
	}
	if math.IsNaN(c.Scale) || math.IsInf(c.Scale, 0) {
		p = append(p, fmt.Sprintf("scale %v must be finite", c.Scale))
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		p = append(p, fmt.Sprintf("dropout %v must be in [0, 1)", c.Dropout))
	}
	if c.NumLayers < -1 {
		p = append(p, fmt.Sprintf("num_layers %d must be -1 (all) or positive", c.NumLayers))
	}
	switch c.Init {
	case "", InitKaimingUniform, InitXavierNormal, InitGaussian:
	default:
		p = append(p, fmt.Sprintf("init %q: want %q, %q or %q", c.Init, InitKaimingUniform, InitXavierNormal, InitGaussian))
	}
	switch c.Encoder {
	case "", EncoderModeShared, EncoderModeSeparate:
	default:
		p = append(p, fmt.Sprintf("encoder %q: want %q or %q", c.Encoder, EncoderModeShared, EncoderModeSeparate))
	}
	if len(p) > 0 {
		return errors.New("lora: config: " + strings.Join(p, "; "))
	}
	return nil
}

// AdapterConfig is adapter_config.json in the mlx-lm/optiq layout (§6.1, product.md §6).
// Extra holds any other top-level keys (the resolved training config); on writing they sit
// beside the typed fields, which win a name clash.
type AdapterConfig struct {
	FineTuneType   string
	ModelType      string
	BaseModel      string
	NumLayers      int // 0: not stated (optiq), meaning all layers
	LoRAParameters LoRAParameters
	Extra          map[string]any
}

// NewAdapterConfig fills the fixed fields for an adapter built from c on baseModel.
func NewAdapterConfig(c Config, baseModel string) AdapterConfig {
	return AdapterConfig{FineTuneType: FineTuneTypeLoRA, ModelType: ModelType, BaseModel: baseModel,
		NumLayers: c.NumLayers, LoRAParameters: c.params()}
}

// LoRAConfig returns the Config this file describes.
func (ac AdapterConfig) LoRAConfig() Config {
	p := ac.LoRAParameters
	return Config{Rank: p.Rank, Scale: p.Scale, Dropout: p.Dropout, Keys: slices.Clone(p.Keys), NumLayers: ac.NumLayers, Encoder: p.Encoder, Init: p.Init}
}

var adapterConfigKeys = []string{"fine_tune_type", "model_type", "base_model", "num_layers", "lora_parameters"}

// MarshalJSON writes the typed fields over Extra, keys sorted.
func (ac AdapterConfig) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(ac.Extra)+5)
	for k, v := range ac.Extra {
		m[k] = v
	}
	m["fine_tune_type"] = ac.FineTuneType
	m["model_type"] = ac.ModelType
	m["base_model"] = ac.BaseModel
	if ac.NumLayers != 0 {
		m["num_layers"] = ac.NumLayers
	} else {
		delete(m, "num_layers")
	}
	m["lora_parameters"] = ac.LoRAParameters
	return json.Marshal(m)
}

// UnmarshalJSON reads the typed fields and keeps every other key in Extra.
func (ac *AdapterConfig) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("adapter config: want a JSON object: %w", err)
	}
	var out AdapterConfig
	fields := map[string]any{
		"fine_tune_type": &out.FineTuneType, "model_type": &out.ModelType, "base_model": &out.BaseModel,
		"num_layers": &out.NumLayers, "lora_parameters": &out.LoRAParameters,
	}
	for _, k := range adapterConfigKeys {
		v, ok := raw[k]
		if !ok || string(v) == "null" {
			continue
		}
		if err := json.Unmarshal(v, fields[k]); err != nil {
			return fmt.Errorf("adapter config: %s: %w", k, err)
		}
	}
	for k, v := range raw {
		if slices.Contains(adapterConfigKeys, k) {
			continue
		}
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("adapter config: %s: %w", k, err)
		}
		if out.Extra == nil {
			out.Extra = map[string]any{}
		}
		out.Extra[k] = x
	}
	*ac = out
	return nil
}

// WriteConfig writes dir/adapter_config.json (indent 2) atomically, creating dir.
func WriteConfig(dir string, ac AdapterConfig) error {
	b, err := json.MarshalIndent(ac, "", "  ")
	if err != nil {
		return fmt.Errorf("lora: write %s: %w", ConfigFile, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lora: write %s: %w", ConfigFile, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ConfigFile), append(b, '\n')); err != nil {
		return fmt.Errorf("lora: write %s: %w", ConfigFile, err)
	}
	return nil
}
