// config.json on disk: decoding either layout (§1.1) over the defaults, deriving what a
// config may leave implicit, LoadConfig and MarshalNested.

package diffusiongemma

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// UnmarshalJSON decodes over DefaultTextConfig, so absent keys keep the §1.2 values, and
// reads transformers' per_layer_config dialect into GlobalHeadDim and NumGlobalKeyValueHeads
// (config_hf.go). Configs are written in the MLX dialect.
func (t *TextConfig) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	type textConfig TextConfig
	p := textConfig(DefaultTextConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	tc := TextConfig(p)
	if err := tc.applyPerLayerConfig(raw); err != nil {
		return err
	}
	*t = tc
	return nil
}

// UnmarshalJSON decodes over DefaultVisionConfig.
func (v *VisionConfig) UnmarshalJSON(b []byte) error {
	type visionConfig VisionConfig
	p := visionConfig(DefaultVisionConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*v = VisionConfig(p)
	return nil
}

// UnmarshalJSON reads either layout (§1.1): text fields from "text_config" when present,
// otherwise from the top level; both over the §1.2 defaults. It only decodes: LoadConfig also
// derives and validates.
func (c *Config) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	// The alias drops this method (no recursion); its name shows in JSON error messages.
	type config Config
	p := config(defaultConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if present(keys, "text_config") {
		p.Layout = LayoutNested
	} else {
		p.Layout = LayoutFlat
		if err := json.Unmarshal(b, &p.TextConfig); err != nil {
			return fmt.Errorf("text fields at the top level: %w", err)
		}
		// At the top level model_type names the outer model, not the text model.
		p.TextConfig.ModelType = TextModelType
	}
	if p.Quantization == nil && present(keys, "quantization_config") {
		var q Quantization
		if err := json.Unmarshal(keys["quantization_config"], &q); err != nil {
			return fmt.Errorf("quantization_config: %w", err)
		}
		p.Quantization = &q
	}
	*c = Config(p)
	return nil
}

func present(keys map[string]json.RawMessage, k string) bool {
	raw, ok := keys[k]
	return ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func parseConfig(data []byte) (*Config, error) {
	if err := checkModelType(data); err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	c.GenerationSource = GenerationFromConfig
	if c.GenerationConfig == nil {
		g := DefaultGenerationConfig()
		c.GenerationConfig = &g
		c.GenerationSource = GenerationFromDefaults
	}
	c.normalize()
	return &c, nil
}

// hubID matches a Hugging Face Hub repository id (owner/name), which a user may pass as
// a model as they would to transformers or mlx-lm.
var hubID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// missingModel explains a model directory that does not exist; for a Hub id, that nothing
// is downloaded here. It is an fs.ErrNotExist.
func missingModel(dir string) error {
	if hubID.MatchString(dir) && !strings.Contains(dir, "..") {
		return notExist(fmt.Sprintf("diffusiongemma: model %s is not a directory here; it looks like a Hugging Face Hub id, and nothing is downloaded here: download it first (hf download %s --local-dir DIR) and pass that directory", dir, dir))
	}
	return notExist("diffusiongemma: model directory " + dir + " does not exist")
}

// notExist is a message that is an fs.ErrNotExist without saying so twice.
type notExist string

func (e notExist) Error() string { return string(e) }
func (e notExist) Unwrap() error { return fs.ErrNotExist }

// LoadConfig reads DIR/config.json and, if present, DIR/generation_config.json, which then
// replaces any generation config embedded in config.json (see the package documentation).
// The result is validated.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil, missingModel(dir)
		}
		return nil, fmt.Errorf("diffusiongemma: read config: %w", err)
	}
	c, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("diffusiongemma: parse %s: %w", path, err)
	}
	genPath := filepath.Join(dir, "generation_config.json")
	gdata, err := os.ReadFile(genPath)
	switch {
	case err == nil:
		var g GenerationConfig
		if err := json.Unmarshal(gdata, &g); err != nil {
			return nil, fmt.Errorf("diffusiongemma: parse %s: %w", genPath, err)
		}
		c.GenerationConfig = &g
		c.GenerationSource = GenerationFromFile
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("diffusiongemma: read generation config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return c, nil
}

// normalize derives what a config may leave implicit: layer_types, RoPE for every layer kind,
// and the rope_type/theta of partially specified RoPE entries. It replaces rather than edits
// the slices, maps and pointers it changes, so a shallow copy can be normalized safely.
func (c *Config) normalize() {
	t := &c.TextConfig
	if len(t.LayerTypes) == 0 && t.NumHiddenLayers > 0 && t.NumHiddenLayers <= maxLayers {
		t.LayerTypes = DefaultLayerTypes(t.NumHiddenLayers)
	}
	rope := make(RopeParametersByLayer, len(t.RopeParameters)+2)
	for k, r := range t.RopeParameters {
		rope[k] = r
	}
	for _, kind := range []LayerType{SlidingAttention, FullAttention} {
		r, ok := rope[kind]
		if !ok {
			rope[kind] = defaultRope(kind)
			continue
		}
		if r.RopeType == "" {
			r.RopeType = RopeDefault
		}
		if r.RopeTheta == 0 {
			r.RopeTheta = defaultRope(kind).RopeTheta
		}
		rope[kind] = r
	}
	t.RopeParameters = rope
	if v := c.VisionConfig; v != nil && v.RopeParameters.RopeType == "" {
		vc := *v
		vc.RopeParameters.RopeType = RopeDefault
		c.VisionConfig = &vc
	}
}

// MarshalNested returns the config as an indented nested-layout config.json (text fields under
// "text_config", every derived default written out).
func (c *Config) MarshalNested() ([]byte, error) {
	cp := *c
	cp.normalize()
	b, err := json.MarshalIndent(&cp, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("diffusiongemma: marshal config: %w", err)
	}
	return append(b, '\n'), nil
}
