package diffusiongemma

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/mx/safetensors"
)

// tinyCheckpoint synthesizes the tiny preset: a fresh config (Synthesize sets its
// quantization) and its tensor map.
func tinyCheckpoint(t *testing.T, e mx.Engine, bits string) (*Config, map[string]*mx.Array) {
	t.Helper()
	return synthWeights(t, e, PresetTiny, bits, 31, nil)
}

// problemCount is the number of problems listed in a Build error (one per indented line).
func problemCount(err error) int { return strings.Count(err.Error(), "\n  ") }

const (
	layer0 = "model.decoder.layers.0."
	layer1 = "model.decoder.layers.1."
)

// TestBuildErrors edits a valid tiny checkpoint (hidden 64, vocab 512, intermediate 128,
// 4 experts of width 32, heads 4×16 on the sliding layer 0 and 4×32 on the full layer 1;
// quantized with group 32 since 32 is not a multiple of 64) or its config, and checks that
// Build reports every problem by tensor name instead of panicking.
func TestBuildErrors(t *testing.T) {
	e := mxtest.Go(t)
	zeros := func(shape ...int) *mx.Array { return mx.Zeros(e, shape, mx.Float32) }
	for _, c := range []struct {
		name     string
		bits     string
		edit     func(cfg *Config, w map[string]*mx.Array)
		want     []string
		problems int // exact number of problems listed; 0 = not checked
	}{
		{"missing tensor", BitsNone,
			func(_ *Config, w map[string]*mx.Array) { delete(w, layer1+"mlp.up_proj.weight") },
			[]string{"missing tensor model.decoder.layers.1.mlp.up_proj.weight"}, 1},
		{"missing encoder scalar", BitsNone,
			func(_ *Config, w map[string]*mx.Array) { delete(w, EncoderLayersPrefix+".0.layer_scalar") },
			[]string{"missing tensor model.encoder.language_model.layers.0.layer_scalar"}, 1},
		{"missing quantized tensor", Bits4,
			func(_ *Config, w map[string]*mx.Array) { delete(w, layer0+"router.scale") },
			[]string{"missing tensor model.decoder.layers.0.router.scale"}, 1},
		{"unexpected tensors", BitsNone,
			func(_ *Config, w map[string]*mx.Array) {
				// Full layers have no v_proj (values come from k_proj); the head is tied.
				w[layer1+"self_attn.v_proj.weight"] = zeros(32, 64)
				w["lm_head.weight"] = zeros(512, 64)
			},
			[]string{"unexpected tensor model.decoder.layers.1.self_attn.v_proj.weight", "unexpected tensor lm_head.weight"}, 2},
		{"norm of the wrong size", BitsNone,
			func(_ *Config, w map[string]*mx.Array) { w[layer0+"input_layernorm.weight"] = zeros(63) },
			[]string{"tensor model.decoder.layers.0.input_layernorm.weight has shape [63], want [64]"}, 1},
		{"linear of the wrong shape", BitsNone,
			func(_ *Config, w map[string]*mx.Array) { w[layer0+"self_attn.o_proj.weight"] = zeros(64, 32) },
			[]string{"tensor model.decoder.layers.0.self_attn.o_proj.weight has shape [64 32], want [64 64]"}, 1},
		{"experts of the wrong shape", BitsNone,
			func(_ *Config, w map[string]*mx.Array) { w[layer1+"experts.down_proj.weight"] = zeros(4, 64, 16) },
			[]string{"tensor model.decoder.layers.1.experts.down_proj.weight has shape [4 64 16], want [4 64 32]"}, 1},
		{"integer norm", BitsNone,
			func(_ *Config, w map[string]*mx.Array) {
				w[DecoderPrefix+".norm.weight"] = mx.Zeros(e, []int{64}, mx.Int32)
			},
			[]string{"tensor model.decoder.norm.weight has dtype int32, want a float type"}, 1},
		{"packed weight not uint32", Bits4,
			func(_ *Config, w map[string]*mx.Array) {
				n := layer0 + "self_attn.q_proj.weight"
				w[n] = mx.AsType(w[n], mx.Float32)
			},
			[]string{"tensor model.decoder.layers.0.self_attn.q_proj.weight has dtype float32, want uint32 (packed)"}, 1},
		{"incomplete quantized triple", Bits4,
			func(_ *Config, w map[string]*mx.Array) { delete(w, layer0+"self_attn.q_proj.biases") },
			[]string{"quantized module model.decoder.layers.0.self_attn.q_proj needs .weight, .scales and .biases"}, 1},
		{"scales do not fit the weight", Bits4,
			func(_ *Config, w map[string]*mx.Array) {
				// gate_proj is [128, 64]: weight u32 [128, 8], scales [128, 2]; cut the scales to 100 rows.
				n := layer0 + "mlp.gate_proj.scales"
				w[n] = mx.SliceAxis(w[n], 0, 0, 100)
			},
			[]string{"quantized module model.decoder.layers.0.mlp.gate_proj: weight [128 8], scales [100 2], biases [128 2] do not fit logical shape [128 64]"}, 1},
		{"config bits contradict the shapes", Bits4,
			// 4-bit storage of in = 64 is 8 words per row; 8 bits would need 16. All 23
			// quantized modules (embedding, 3 self-conditioning, 10 + 9 per layer) are wrong;
			// the first 20 are listed, each once.
			func(cfg *Config, _ map[string]*mx.Array) { cfg.Quantization.Bits = 8 },
			[]string{"quantized module model.decoder.embed_tokens: quantization config says 8 bits, shapes say 4",
				"quantized module model.decoder.layers.1.mlp.up_proj: quantization config says 8 bits, shapes say 4",
				"\n  ... and 3 more"}, 0},
		{"8-bit weights, config says 4", Bits8,
			// Synthesize writes an 8-bit default; claim 4 bits everywhere instead.
			func(cfg *Config, _ map[string]*mx.Array) { cfg.Quantization.Bits, cfg.Quantization.Modules = 4, nil },
			[]string{"quantized module model.decoder.layers.0.self_attn.q_proj: quantization config says 4 bits, shapes say 8"}, 0},
		{"one module override contradicts", Bits4,
			func(cfg *Config, _ map[string]*mx.Array) {
				cfg.Quantization.Modules[layer0+"mlp.down_proj"] = ModuleQuantization{Quantized: true, Bits: 8}
			},
			[]string{"quantized module model.decoder.layers.0.mlp.down_proj: quantization config says 8 bits, shapes say 4 (weight [64 16], scales [64 4], group 32)"}, 1},
		{"embedding override contradicts", Bits4,
			func(cfg *Config, _ map[string]*mx.Array) {
				cfg.Quantization.Modules[DecoderPrefix+".embed_tokens"] = ModuleQuantization{Quantized: true, Bits: 8}
			},
			[]string{"quantized module model.decoder.embed_tokens: quantization config says 8 bits, shapes say 4"}, 1},
		{"quantized weights, no quantization config", Bits4,
			// Without a config the group defaults to 64, so the [.., 2] scales imply in = 128.
			func(cfg *Config, _ map[string]*mx.Array) { cfg.Quantization = nil },
			[]string{"quantized module model.decoder.embed_tokens: shapes imply input size 128, config implies 64"}, 0},
		{"config hidden size disagrees", BitsNone,
			func(cfg *Config, _ map[string]*mx.Array) { cfg.TextConfig.HiddenSize = 32 },
			[]string{"tensor model.decoder.embed_tokens.weight has shape [512 64], want [512 32]",
				"tensor model.decoder.norm.weight has shape [64], want [32]", "\n  ... and "}, 0},
		{"config vocabulary disagrees", Bits4,
			func(cfg *Config, _ map[string]*mx.Array) { cfg.TextConfig.VocabSize = 600 },
			[]string{"quantized module model.decoder.embed_tokens: weight [512 8], scales [512 2], biases [512 2] do not fit logical shape [600 64]"}, 1},
		{"config has more layers", BitsNone,
			func(cfg *Config, _ map[string]*mx.Array) {
				cfg.TextConfig.NumHiddenLayers = 3
				cfg.TextConfig.LayerTypes = DefaultLayerTypes(3)
			},
			[]string{"missing tensor model.encoder.language_model.layers.2.layer_scalar",
				"missing tensor model.decoder.layers.2.self_attn.q_proj.weight",
				// Layer 1 turned sliding: it now needs a v_proj and has the smaller heads.
				"missing tensor model.decoder.layers.1.self_attn.v_proj.weight",
				"tensor model.decoder.layers.1.self_attn.q_norm.weight has shape [32], want [16]",
				"\n  ... and 7 more"}, 0},
		{"config has fewer layers", BitsNone,
			func(cfg *Config, _ map[string]*mx.Array) {
				cfg.TextConfig.NumHiddenLayers = 1
				cfg.TextConfig.LayerTypes = DefaultLayerTypes(1)
			},
			[]string{"unexpected tensor model.decoder.layers.1.layer_scalar",
				// The one layer left is full: no v_proj, the larger heads.
				"unexpected tensor model.decoder.layers.0.self_attn.v_proj.weight",
				"tensor model.decoder.layers.0.self_attn.q_norm.weight has shape [16], want [32]"}, 0},
		{"no tensors at all", BitsNone,
			func(_ *Config, w map[string]*mx.Array) { clear(w) },
			[]string{"missing tensor model.decoder.embed_tokens.weight"}, 0},
		{"invalid config", BitsNone,
			func(cfg *Config, _ map[string]*mx.Array) { cfg.TextConfig.TopKExperts = 0 },
			[]string{"text_config.top_k_experts must be positive"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, w := tinyCheckpoint(t, e, c.bits)
			c.edit(cfg, w)
			m, err := Build(e, cfg, w, LoadOptions{})
			if err == nil {
				t.Fatalf("Build succeeded (model with %d layers), want an error", len(m.Layers))
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not contain %q:\n%v", s, err)
				}
			}
			if c.problems > 0 && problemCount(err) != c.problems {
				t.Errorf("error lists %d problems, want %d:\n%v", problemCount(err), c.problems, err)
			}
		})
	}
}

// TestBuildIgnoresVisionTower: vision tensors are not part of the text model and are
// neither used nor reported as unexpected.
func TestBuildIgnoresVisionTower(t *testing.T) {
	e := mxtest.Go(t)
	cfg, w := tinyCheckpoint(t, e, BitsNone)
	w["model.encoder.vision_tower.patch_embedder.input_proj.weight"] = mx.Zeros(e, []int{8, 8}, mx.Float32)
	w["model.encoder.embed_vision.embedding_projection.weight"] = mx.Zeros(e, []int{64, 8}, mx.Float32)
	if _, err := Build(e, cfg, w, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
}

// roundTripIDs is the prompt and canvas the load tests compare logits on.
func roundTripIDs(e mx.Engine) (prompt, canvas *mx.Array) {
	rng := rand.New(rand.NewPCG(32, 33))
	return randomIDs(e, rng, 512, 11), randomIDs(e, rng, 512, 6)
}

// TestLoadRoundTrip writes checkpoints with WriteCheckpoint and loads them back: the
// loaded model must give bit-identical logits to the in-memory one.
func TestLoadRoundTrip(t *testing.T) {
	e := mxtest.Go(t)
	prompt, canvas := roundTripIDs(e)
	for _, bits := range []string{BitsNone, Bits4, BitsMixed} {
		t.Run(bits, func(t *testing.T) {
			cfg, w := tinyCheckpoint(t, e, bits)
			m, err := Build(e, cfg, w, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := WriteCheckpoint(dir, cfg, w, nil); err != nil {
				t.Fatal(err)
			}
			loaded, err := Load(e, dir, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantIdentical(t, "loaded logits", loaded.Forward(prompt, canvas).Float32s(), m.Forward(prompt, canvas).Float32s())
		})
	}
}

// TestLoadSharded writes the weights as several shards plus model.safetensors.index.json.
func TestLoadSharded(t *testing.T) {
	e := mxtest.Go(t)
	prompt, canvas := roundTripIDs(e)
	cfg, w := tinyCheckpoint(t, e, Bits4)
	m, err := Build(e, cfg, w, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteCheckpoint(dir, cfg, nil, nil); err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for name, a := range w {
		st, err := mx.ToTensor(name, a)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, st)
	}
	if err := safetensors.WriteShards(dir, ts, 32<<10, map[string]string{"format": "mlx"}); err != nil {
		t.Fatal(err)
	}
	shards, err := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
	if err != nil || len(shards) < 2 {
		t.Fatalf("want several shards, got %v (%v)", shards, err)
	}
	loaded, err := Load(e, dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantIdentical(t, "sharded logits", loaded.Forward(prompt, canvas).Float32s(), m.Forward(prompt, canvas).Float32s())
}

// TestLoadErrors writes broken checkpoint directories: every error names the directory
// and, for weight problems, the tensor.
func TestLoadErrors(t *testing.T) {
	e := mxtest.Go(t)
	for _, c := range []struct {
		name  string
		bits  string
		edit  func(cfg *Config, w map[string]*mx.Array)
		after func(t *testing.T, dir string) // changes the written directory
		want  []string
	}{
		{"missing tensor", BitsNone,
			func(_ *Config, w map[string]*mx.Array) { delete(w, layer0+"router.per_expert_scale") }, nil,
			[]string{"missing tensor model.decoder.layers.0.router.per_expert_scale"}},
		{"unexpected tensor", Bits4,
			func(_ *Config, w map[string]*mx.Array) {
				w[layer0+"self_attn.v_norm.weight"] = mx.Ones(e, []int{16}, mx.Float32)
			}, nil,
			[]string{"unexpected tensor model.decoder.layers.0.self_attn.v_norm.weight"}},
		{"wrong shape", BitsNone,
			func(_ *Config, w map[string]*mx.Array) {
				w[layer1+"self_attn.k_norm.weight"] = mx.Ones(e, []int{16}, mx.Float32)
			}, nil,
			[]string{"tensor model.decoder.layers.1.self_attn.k_norm.weight has shape [16], want [32]"}},
		{"config hidden size disagrees with the weights", Bits4,
			func(cfg *Config, _ map[string]*mx.Array) { cfg.TextConfig.HiddenSize = 128 }, nil,
			[]string{"tensor model.decoder.norm.weight has shape [64], want [128]",
				"quantized module model.decoder.embed_tokens: shapes imply input size 64, config implies 128"}},
		{"config bits contradict the shapes", Bits4,
			func(cfg *Config, _ map[string]*mx.Array) { cfg.Quantization.Bits = 8 }, nil,
			[]string{"quantized module model.decoder.layers.0.self_attn.q_proj: quantization config says 8 bits, shapes say 4"}},
		{"no weights", BitsNone, nil,
			func(t *testing.T, dir string) { remove(t, filepath.Join(dir, "model.safetensors")) },
			[]string{"no model.safetensors.index.json, model.safetensors or *.safetensors file"}},
		{"no config", BitsNone, nil,
			func(t *testing.T, dir string) { remove(t, filepath.Join(dir, "config.json")) },
			[]string{"config.json"}},
		{"truncated weights", BitsNone, nil,
			func(t *testing.T, dir string) {
				p := filepath.Join(dir, "model.safetensors")
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(p, st.Size()/2); err != nil {
					t.Fatal(err)
				}
			},
			[]string{"model.safetensors"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, w := tinyCheckpoint(t, e, c.bits)
			if c.edit != nil {
				c.edit(cfg, w)
			}
			dir := t.TempDir()
			if err := WriteCheckpoint(dir, cfg, w, nil); err != nil {
				t.Fatal(err)
			}
			if c.after != nil {
				c.after(t, dir)
			}
			m, err := Load(e, dir, LoadOptions{})
			if err == nil {
				t.Fatalf("Load succeeded (model with %d layers), want an error", len(m.Layers))
			}
			for _, s := range append(c.want, dir) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not contain %q:\n%v", s, err)
				}
			}
		})
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// TestLoadSkipsVisionTower: a checkpoint with a vision tower loads as the text model.
func TestLoadSkipsVisionTower(t *testing.T) {
	e := mxtest.Go(t)
	prompt, canvas := roundTripIDs(e)
	cfg, w := tinyCheckpoint(t, e, BitsNone)
	m, err := Build(e, cfg, w, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w["model.encoder.vision_tower.std_bias"] = mx.Zeros(e, []int{8}, mx.Float32)
	dir := t.TempDir()
	if err := WriteCheckpoint(dir, cfg, w, nil); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(e, dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantIdentical(t, "logits", loaded.Forward(prompt, canvas).Float32s(), m.Forward(prompt, canvas).Float32s())
}
