package diffusiongemma

import (
	"encoding/json"
	"fmt"
)

// Model types of checkpoints that are not DiffusionGemma but look enough like it to get
// far before failing: the autoregressive Gemma 4 shares the layer layout, the experts
// and the vision tower, so its weights would load and run with the wrong attention and
// objective.
const (
	gemma4ModelType     = "gemma4"
	gemma4TextModelType = "gemma4_text"
)

// checkModelType refuses a config.json written for another model before any field of it
// is decoded, so the one line the user sees names the model type found rather than the
// first geometry field the other model spells differently. model_type must be
// "diffusion_gemma" at the top level and, where a text_config is present,
// "diffusion_gemma_text" there. An absent model_type is taken as DiffusionGemma's (the
// defaults fill it in, as for every other field); syntax errors are left to the decoder.
func checkModelType(data []byte) error {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return nil
	}
	if mt, ok := modelTypeOf(top); ok && mt != ModelType {
		return fmt.Errorf("model_type %q %s; dgtune trains DiffusionGemma (model_type %q)", mt, describeModelType(mt), ModelType)
	}
	var text map[string]json.RawMessage
	if raw, ok := top["text_config"]; !ok || json.Unmarshal(raw, &text) != nil {
		return nil
	}
	if mt, ok := modelTypeOf(text); ok && mt != TextModelType {
		return fmt.Errorf("text_config.model_type %q %s; DiffusionGemma's text model is %q", mt, describeModelType(mt), TextModelType)
	}
	return nil
}

// modelTypeOf returns the string model_type of a config object, if it has one. A
// model_type that is not a string is reported as its JSON text.
func modelTypeOf(obj map[string]json.RawMessage) (string, bool) {
	raw, ok := obj["model_type"]
	if !ok || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return string(raw), true
	}
	return s, true
}

func describeModelType(mt string) string {
	switch mt {
	case gemma4ModelType:
		return "is the autoregressive Gemma 4, not DiffusionGemma"
	case gemma4TextModelType:
		return "is the autoregressive Gemma 4's text model, not DiffusionGemma's"
	case TextModelType:
		return "is DiffusionGemma's text config alone, not a checkpoint's config.json"
	}
	return "is not DiffusionGemma"
}
