package diffusiongemma

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// withModelTypes rewrites a testdata config.json with the given top-level and
// text_config model types ("" deletes the key, "-" leaves it).
func withModelTypes(t *testing.T, name, top, text string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	set := func(m map[string]any, v string) {
		switch v {
		case "-":
		case "":
			delete(m, "model_type")
		default:
			m["model_type"] = v
		}
	}
	set(doc, top)
	if tc, ok := doc["text_config"].(map[string]any); ok {
		set(tc, text)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A checkpoint of another model is refused with one line naming what it is, before any
// geometry is read; both real layouts keep loading.
func TestModelType(t *testing.T) {
	llama := []byte(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
		"intermediate_size": 8192, "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
		"rope_scaling": {"factor": 32.0, "rope_type": "llama3"}, "vocab_size": 128256, "eos_token_id": [128001, 128008]}`)
	tests := []struct {
		name string
		json []byte
		want string // "" = loads
	}{
		{"nested", withModelTypes(t, "config.nested.json", "-", "-"), ""},
		{"flat optiq", withModelTypes(t, "config.flat-optiq.json", "-", "-"), ""},
		{"no model_type anywhere", withModelTypes(t, "config.nested.json", "", ""), ""},
		{"gemma4", withModelTypes(t, "config.nested.json", "gemma4", "-"),
			`model_type "gemma4" is the autoregressive Gemma 4, not DiffusionGemma; dgtune trains DiffusionGemma (model_type "diffusion_gemma")`},
		{"gemma4 all through", withModelTypes(t, "config.nested.json", "gemma4", "gemma4_text"),
			`model_type "gemma4" is the autoregressive Gemma 4, not DiffusionGemma; dgtune trains DiffusionGemma (model_type "diffusion_gemma")`},
		{"gemma4 text model", withModelTypes(t, "config.nested.json", "-", "gemma4_text"),
			`text_config.model_type "gemma4_text" is the autoregressive Gemma 4's text model, not DiffusionGemma's; DiffusionGemma's text model is "diffusion_gemma_text"`},
		{"gemma4 flat", withModelTypes(t, "config.flat-optiq.json", "gemma4", "-"),
			`model_type "gemma4" is the autoregressive Gemma 4, not DiffusionGemma; dgtune trains DiffusionGemma (model_type "diffusion_gemma")`},
		{"llama", llama, `model_type "llama" is not DiffusionGemma; dgtune trains DiffusionGemma (model_type "diffusion_gemma")`},
		{"text config alone", []byte(`{"model_type": "diffusion_gemma_text", "hidden_size": 64}`),
			`model_type "diffusion_gemma_text" is DiffusionGemma's text config alone, not a checkpoint's config.json; dgtune trains DiffusionGemma (model_type "diffusion_gemma")`},
		{"not a string", []byte(`{"model_type": 7}`), `model_type "7" is not DiffusionGemma; dgtune trains DiffusionGemma (model_type "diffusion_gemma")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(tt.json)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ParseConfig: %v", err)
				}
				return
			}
			if want := "diffusiongemma: parse config.json: " + tt.want; err == nil || err.Error() != want {
				t.Errorf("ParseConfig error\n got %v\nwant %s", err, want)
			}
			dir := writeDir(t, map[string]string{"config.json": string(tt.json)})
			_, err = LoadConfig(dir)
			if want := "diffusiongemma: parse " + filepath.Join(dir, "config.json") + ": " + tt.want; errString(err) != want {
				t.Errorf("LoadConfig error\n got %v\nwant %s", err, want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
