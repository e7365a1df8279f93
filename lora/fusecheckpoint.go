package lora

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// Files of a checkpoint directory that a fused checkpoint writes itself rather than copies.
const (
	checkpointConfigFile = "config.json"
	generationConfigFile = "generation_config.json"
	tokenizerFile        = "tokenizer.json"
	fusedWeightsFile     = "model.safetensors"
)

// A FusedCheckpoint is an adapter folded into its base checkpoint, held in memory until
// Write puts it in a directory and Probe compares it with base+adapter.
//
// The tensors are fused as they are stored (FuseTensors on the raw checkpoint, computed in
// float32: fuseStored), so every module the adapter does not touch — the vision tower
// included — passes through byte-identical and the fused weights keep the checkpoint's
// dtype, as mlx-lm's fuse does. config.json is copied verbatim unless dequantize changed
// the quantization map; the tokenizer, generation config and every other side file are
// copied.
type FusedCheckpoint struct {
	Base       string                 // the base checkpoint's directory
	Config     *diffusiongemma.Config // the base's config
	Adapter    *AdapterFile
	Dequantize bool // adapted quantized modules are stored dense

	e          mx.Engine
	tensors    map[string]*mx.Array // every tensor of the fused checkpoint
	configJSON []byte               // its config.json
	side       []string             // files of Base copied as they are
}

// FuseCheckpoint reads the checkpoint in baseDir and folds f into it. The adapter is
// checked against the base's geometry (config.json alone) before any weight is read;
// a cancelled ctx stops it between reading and fusing with ctx.Err().
func FuseCheckpoint(ctx context.Context, e mx.Engine, baseDir string, f *AdapterFile, dequantize bool) (*FusedCheckpoint, error) {
	cfg, err := diffusiongemma.LoadConfig(baseDir)
	if err != nil {
		return nil, fmt.Errorf("base model: %w", err)
	}
	if err := CheckGeometry(cfg, f); err != nil {
		return nil, fmt.Errorf("the model in %s: %w", baseDir, err)
	}
	origConfig, err := os.ReadFile(filepath.Join(baseDir, checkpointConfigFile))
	if err != nil {
		return nil, fmt.Errorf("base model: %w", err)
	}
	side, err := sideFiles(baseDir)
	if err != nil {
		return nil, err
	}
	raw, err := readTensors(e, baseDir)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fused, fcfg, err := fuseStored(cfg, raw, f, dequantize)
	if err != nil {
		return nil, err
	}
	conf, err := fusedConfigJSON(origConfig, cfg.Quantization, fcfg.Quantization)
	if err != nil {
		return nil, err
	}
	return &FusedCheckpoint{Base: baseDir, Config: cfg, Adapter: f, Dequantize: dequantize,
		e: e, tensors: fused, configJSON: conf, side: side}, nil
}

// Requantized reports whether the adapted modules were quantized again (lossy): a
// quantized base fused without Dequantize.
func (c *FusedCheckpoint) Requantized() bool {
	return c.Config.Quantization != nil && !c.Dequantize
}

// Write writes the fused checkpoint into the existing directory dir: model.safetensors,
// config.json, the base's side files, and generation_config.json from the base's config
// when the base has no such file, so that the fused directory is complete on its own.
func (c *FusedCheckpoint) Write(dir string) error {
	if err := mx.SaveSafetensors(filepath.Join(dir, fusedWeightsFile), c.tensors, map[string]string{"format": "mlx"}); err != nil {
		return fmt.Errorf("write fused weights: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, checkpointConfigFile), c.configJSON); err != nil {
		return fmt.Errorf("write fused config: %w", err)
	}
	for _, name := range c.side {
		if err := atomicfile.Copy(filepath.Join(c.Base, name), filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
	}
	if !slices.Contains(c.side, generationConfigFile) && c.Config.GenerationConfig != nil {
		// The base's generation config came from config.json or the defaults.
		g, err := json.MarshalIndent(c.Config.GenerationConfig, "", "  ")
		if err != nil {
			return fmt.Errorf("write generation config: %w", err)
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, generationConfigFile), append(g, '\n')); err != nil {
			return fmt.Errorf("write generation config: %w", err)
		}
	}
	return nil
}

// fuseStored is FuseTensors computed in float32 and stored in the checkpoint's dtypes:
// the adapted modules' weights (or quantization scales and biases) are widened to float32
// first and the results narrowed back to the stored dtype once at the end. mlx-lm works in
// the stored dtype throughout (bfloat16 dequantization, factors cast to bfloat16 before the
// product), which rounds several times; one rounding is closer to base+adapter.
// Re-quantization itself stays lossy either way: MLX's affine quantizer nudges each
// group's scale so that its edge and 0.0 fall on codes, so even an unchanged weight can
// come back on a slightly different grid.
func fuseStored(cfg *diffusiongemma.Config, raw map[string]*mx.Array, f *AdapterFile, dequantize bool) (map[string]*mx.Array, *diffusiongemma.Config, error) {
	wide := maps.Clone(raw)
	stored := map[string]mx.DType{} // module → dtype of its weight, or of its scales when quantized
	for mod := range f.Modules {
		if sc, ok := raw[mod+".scales"]; ok {
			stored[mod] = sc.DType()
			for _, k := range []string{".scales", ".biases"} {
				if a := raw[mod+k]; a != nil && a.DType().IsFloat() {
					wide[mod+k] = mx.AsType(a, mx.Float32)
				}
			}
		} else if w, ok := raw[mod+".weight"]; ok && w.DType().IsFloat() {
			stored[mod] = w.DType()
			wide[mod+".weight"] = mx.AsType(w, mx.Float32)
		}
	}
	out, fcfg, err := FuseTensors(cfg, wide, f, dequantize)
	if err != nil {
		return nil, nil, err
	}
	for mod, dt := range stored {
		for _, k := range []string{".weight", ".scales", ".biases"} {
			if a := out[mod+k]; a != nil && a.DType().IsFloat() && a.DType() != dt {
				out[mod+k] = mx.AsType(a, dt)
			}
		}
	}
	return out, fcfg, nil
}

// sideFiles lists the files of a checkpoint directory to copy into the fused one: all
// regular, non-hidden files except the weights and config.json. tokenizer.json must be
// among them.
func sideFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("base model: %w", err)
	}
	var out []string
	for _, en := range entries {
		name := en.Name()
		if !en.Type().IsRegular() || strings.HasPrefix(name, ".") || name == checkpointConfigFile ||
			strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".safetensors.index.json") {
			continue
		}
		out = append(out, name)
	}
	if !slices.Contains(out, tokenizerFile) {
		return nil, fmt.Errorf("base model %s has no %s: a fused checkpoint must carry its tokenizer", dir, tokenizerFile)
	}
	return out, nil
}

// readTensors reads every tensor of a checkpoint directory as stored.
func readTensors(e mx.Engine, dir string) (map[string]*mx.Array, error) {
	ck, err := mx.OpenCheckpoint(e, dir)
	if err != nil {
		return nil, fmt.Errorf("base model %s: %w", dir, err)
	}
	defer ck.Close()
	out := map[string]*mx.Array{}
	for _, n := range ck.Names() {
		a, err := ck.Load(n)
		if err != nil {
			return nil, fmt.Errorf("base model %s: %w", dir, err)
		}
		out[n] = a
	}
	return out, nil
}

// fusedConfigJSON returns the fused checkpoint's config.json: the original bytes when the
// quantization map is unchanged, else the original with "quantization" (and
// "quantization_config", where present) replaced by the new map. Every other key is kept.
func fusedConfigJSON(orig []byte, before, after *diffusiongemma.Quantization) ([]byte, error) {
	if sameQuantization(before, after) {
		return orig, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(orig, &top); err != nil {
		return nil, fmt.Errorf("base config.json: %w", err)
	}
	q, err := json.Marshal(after)
	if err != nil {
		return nil, fmt.Errorf("fused quantization map: %w", err)
	}
	replaced := false
	for _, k := range []string{"quantization", "quantization_config"} {
		if v, ok := top[k]; ok && string(v) != "null" {
			top[k] = q
			replaced = true
		}
	}
	if !replaced {
		top["quantization"] = q
	}
	b, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("fused config.json: %w", err)
	}
	return append(b, '\n'), nil
}

// sameQuantization compares two maps by what they say (their JSON), so that an empty
// override map and an absent one are the same.
func sameQuantization(a, b *diffusiongemma.Quantization) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// Probe input geometry: short enough to be instant on any model, long enough that the
// canvas spans several sliding-window positions of the small presets.
const (
	probePrompt = 12
	probeCanvas = 16
)

// FuseProbe compares a fused checkpoint with base+adapter on one seeded input.
type FuseProbe struct {
	Seed                 uint64
	PromptLen, CanvasLen int     // ids of the probe input (FuseProbeInput)
	Diff                 float64 // largest |logit| difference, fused against base+adapter
	MaxLogit             float64 // largest |logit| of base+adapter
	Effect               float64 // the adapter's own effect: largest |logit| difference, base+adapter against the base
}

// Thresholds of Lossy: a tenth of the largest logit, or half of what the adapter itself
// changes. Exact fuses (unquantized or dequantized) differ by float rounding, ~1e-5 of the
// logits.
const (
	lossyOfMaxLogit = 0.1
	lossyOfEffect   = 0.5
)

// Lossy reports whether the fused model is far from base+adapter: by more than a tenth of
// the largest logit or half of what the adapter itself moves (seen when re-quantizing a
// 4-bit model flips its top-k routing).
func (p FuseProbe) Lossy() bool {
	return p.Diff > lossyOfMaxLogit*p.MaxLogit || p.Diff > lossyOfEffect*p.Effect
}

// Probe loads the base with the adapter mounted and the fused checkpoint written in dir
// (with the normal loader), runs both on the seeded FuseProbeInput and compares their
// logits.
func (c *FusedCheckpoint) Probe(dir string, seed uint64) (FuseProbe, error) {
	p := FuseProbe{Seed: seed, PromptLen: probePrompt, CanvasLen: probeCanvasLen(c.Config)}
	base, err := diffusiongemma.Load(c.e, c.Base, diffusiongemma.LoadOptions{})
	if err != nil {
		return p, fmt.Errorf("probe: base model: %w", err)
	}
	prompt, canvas := FuseProbeInput(base.Config, seed)
	plain := probeForward(base, prompt, canvas)
	if _, err := Mount(base, c.Adapter); err != nil {
		return p, fmt.Errorf("probe: %w", err)
	}
	fused, err := diffusiongemma.Load(c.e, dir, diffusiongemma.LoadOptions{})
	if err != nil {
		return p, fmt.Errorf("probe: the fused checkpoint does not load: %w", err)
	}
	want := probeForward(base, prompt, canvas)
	got := probeForward(fused, prompt, canvas)
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return p, fmt.Errorf("probe: non-finite logits at %d (fused %v, base+adapter %v)", i, got[i], want[i])
		}
		p.Diff = max(p.Diff, d)
		p.MaxLogit = max(p.MaxLogit, math.Abs(float64(want[i])))
		p.Effect = max(p.Effect, math.Abs(float64(want[i])-float64(plain[i])))
	}
	return p, nil
}

func probeForward(m *diffusiongemma.Model, prompt, canvas []int32) []float32 {
	e := m.Engine
	return m.Forward(mx.FromInt32(e, prompt, 1, len(prompt)), mx.FromInt32(e, canvas, 1, len(canvas))).Float32s()
}

func probeCanvasLen(cfg *diffusiongemma.Config) int { return min(probeCanvas, cfg.CanvasLength) }

// FuseProbeInput is the probe's prompt and canvas ids for seed: uniform over the
// vocabulary, skipping the image placeholder ids, which would ask for an image.
func FuseProbeInput(cfg *diffusiongemma.Config, seed uint64) (prompt, canvas []int32) {
	rng := rand.New(rand.NewPCG(seed, 0x70726f6265)) // "probe"
	skip := []int{cfg.ImageTokenID, cfg.BOITokenID, cfg.EOITokenID}
	if cfg.VideoTokenID != nil {
		skip = append(skip, *cfg.VideoTokenID)
	}
	vocab := cfg.TextConfig.VocabSize
	draw := func(n int) []int32 {
		ids := make([]int32, 0, n)
		for len(ids) < n {
			id := rng.IntN(vocab)
			if !slices.Contains(skip, id) {
				ids = append(ids, int32(id))
			}
		}
		return ids
	}
	return draw(probePrompt), draw(probeCanvasLen(cfg))
}
