package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgtune/dgtune/internal/atomicfile"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// writeConfig writes the input's config.json with MLX's quantization map added under
// both keys mlx-lm writes (quantization, and quantization_config for transformers-style
// readers), every other key kept as the input has it. With an explicit --dtype the dtype
// keys the input has (torch_dtype, dtype, text_config.dtype) are set to it, so that the
// config says what the files hold.
func writeConfig(o Options, stage string, q *dg.Quantization, explicit *mx.DType) error {
	raw, err := os.ReadFile(filepath.Join(o.Model, "config.json"))
	if err != nil {
		return fmt.Errorf("read %s: %w", o.Model, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return fmt.Errorf("read %s/config.json: %w", o.Model, err)
	}
	qj, err := json.Marshal(q)
	if err != nil {
		return err
	}
	top["quantization"] = qj
	top["quantization_config"] = qj
	if explicit != nil {
		name, _ := json.Marshal(explicit.String())
		for _, k := range []string{"torch_dtype", "dtype"} {
			if _, ok := top[k]; ok {
				top[k] = name
			}
		}
		if tc, ok := top["text_config"]; ok {
			var m map[string]json.RawMessage
			if json.Unmarshal(tc, &m) == nil {
				if _, ok := m["dtype"]; ok {
					m["dtype"] = name
					if top["text_config"], err = json.Marshal(m); err != nil {
						return err
					}
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(top); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(stage, "config.json"), buf.Bytes())
}

// weightFile reports whether a file of the input holds weights (which convert rewrites)
// rather than a side file it copies: safetensors shards and their index, and the other
// weight formats (PyTorch, GGUF) whose contents the output does not carry.
func weightFile(name string) bool {
	for _, s := range []string{".safetensors", ".safetensors.index.json", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// copySideFiles copies every regular, non-hidden file of the input except config.json
// and the weights: tokenizer.json, tokenizer_config.json, special_tokens_map.json,
// generation_config.json, chat_template.jinja, processor and preprocessor configs, README
// and the like — what mlx-vlm's convert copies (*.json, *.py) and its processor saves.
// Subdirectories are not copied.
func copySideFiles(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("read %s: %w", from, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || name == "config.json" || weightFile(name) {
			continue
		}
		if err := copyFile(filepath.Join(from, name), filepath.Join(to, name)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	if err := atomicfile.Copy(src, dst); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}
