package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// Files of a checkpoint directory that fuse writes itself rather than copies.
const (
	configFile     = "config.json"
	generationFile = "generation_config.json"
	tokenizerFile  = "tokenizer.json"
	weightsFile    = "model.safetensors"
)

// Probe input geometry: short enough to be instant on any model, long enough that the
// canvas spans several sliding-window positions of the small presets.
const (
	probePrompt = 12
	probeCanvas = 16
)

// fuse folds the adapter into the base checkpoint and writes a complete checkpoint.
//
// The tensors are fused as they are stored (lora.FuseTensors on the raw checkpoint), so
// every module the adapter does not touch — the vision tower included — passes through
// byte-identical and the fused weights keep the checkpoint's dtype, as mlx-lm's fuse does.
// config.json is copied verbatim unless --dequantize changed the quantization map; the
// tokenizer, generation config and every other side file are copied. Before the result is
// moved into place it is loaded back with the normal loader and compared with base+adapter
// on a seeded probe input; a difference that is large next to the logits or to what the
// adapter itself does is reported as a warning.
//
// The base is --model, or the adapter's base_model. A --model that is not the adapter's
// base_model (another directory, while the recorded one exists) is refused unless
// forceBase: a base of the same geometry with other weights fuses without any error and
// gives a model that is neither.
func (x *exporter) fuse(adapterDir string, dequantize, forceBase bool) error {
	f, err := loadAdapter(x.e, adapterDir)
	if err != nil {
		return err
	}
	modelDir, err := x.fuseBase(adapterDir, f.Config.BaseModel, forceBase)
	if err != nil {
		return err
	}
	cfg, err := dg.LoadConfig(modelDir)
	if err != nil {
		return fmt.Errorf("base model: %w", err)
	}
	if err := checkGeometry(cfg, modelDir, f); err != nil {
		return err
	}
	origConfig, err := os.ReadFile(filepath.Join(modelDir, configFile))
	if err != nil {
		return fmt.Errorf("base model: %w", err)
	}
	side, err := sideFiles(modelDir)
	if err != nil {
		return err
	}
	raw, err := readTensors(x.e, modelDir)
	if err != nil {
		return err
	}
	if err := x.interrupted(); err != nil {
		return err
	}
	fused, fcfg, err := fuseTensors(cfg, raw, f, dequantize)
	if err != nil {
		return err
	}
	conf, err := fusedConfigJSON(origConfig, cfg.Quantization, fcfg.Quantization)
	if err != nil {
		return err
	}

	st, err := x.stage()
	if err != nil {
		return err
	}
	defer st.abort()
	if err := mx.SaveSafetensors(filepath.Join(st.tmp, weightsFile), fused, map[string]string{"format": "mlx"}); err != nil {
		return fmt.Errorf("write fused weights: %w", err)
	}
	if err := writeFile(filepath.Join(st.tmp, configFile), conf); err != nil {
		return fmt.Errorf("write fused config: %w", err)
	}
	for _, name := range side {
		if err := copyFile(filepath.Join(modelDir, name), filepath.Join(st.tmp, name)); err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
	}
	if !slices.Contains(side, generationFile) && cfg.GenerationConfig != nil {
		// The base's generation config came from config.json or the defaults; write it out
		// so the fused directory is complete on its own.
		g, err := json.MarshalIndent(cfg.GenerationConfig, "", "  ")
		if err != nil {
			return fmt.Errorf("write generation config: %w", err)
		}
		if err := writeFile(filepath.Join(st.tmp, generationFile), append(g, '\n')); err != nil {
			return fmt.Errorf("write generation config: %w", err)
		}
	}

	if err := x.interrupted(); err != nil {
		return err
	}
	diff, scale, effect, err := x.probe(modelDir, st.tmp, f)
	if err != nil {
		return err
	}
	if err := x.commit(st); err != nil {
		return err
	}
	how := "unquantized"
	if cfg.Quantization != nil {
		how = "quantized modules re-quantized with their own bits and group size"
		if dequantize {
			how = "adapted modules stored dequantized"
		}
	}
	fmt.Fprintf(x.stdout, "fused %s (%d modules, rank %d, scale %g) into %s; wrote %s (%s)\n",
		adapterDir, len(f.Modules), f.Rank(), f.Scale(), modelDir, x.out, how)
	fmt.Fprintf(x.stdout, "probe (%d prompt + %d canvas ids, seed %d): max |logit| difference fused vs base+adapter %.6g (max |logit| %.6g; the adapter moves logits by up to %.6g)\n",
		probePrompt, probeCanvasLen(cfg), x.seed, diff, scale, effect)
	if w := fuseWarning(diff, scale, effect, cfg.Quantization != nil && !dequantize); w != "" {
		fmt.Fprintln(x.stderr, w)
	}
	return nil
}

// Warning thresholds of a fuse's probe difference: a tenth of the largest logit, or half
// of what the adapter itself changes. Exact fuses (unquantized or --dequantize) differ by
// float rounding, ~1e-5 of the logits.
const (
	warnOfScale  = 0.1
	warnOfEffect = 0.5
)

// fuseWarning is the warning for a fused model that is far from base+adapter, or "".
func fuseWarning(diff, scale, effect float64, requantized bool) string {
	if diff <= warnOfScale*scale && diff <= warnOfEffect*effect {
		return ""
	}
	w := fmt.Sprintf("warning: the fused model's logits differ from base+adapter by up to %.4g (the largest logit is %.4g, the adapter itself moves logits by up to %.4g)", diff, scale, effect)
	if requantized {
		w += ": re-quantizing the adapted modules lost much of the adapter; --dequantize stores them unquantized and exact, or ship the adapter instead of a fused model"
	}
	return w
}

// fuseBase is the checkpoint to fuse into: --model when given, checked against the
// adapter's recorded base_model, else the recorded one (resolved as eval does).
func (x *exporter) fuseBase(adapter, recorded string, force bool) (string, error) {
	if x.model == "" {
		if recorded == "" {
			return "", errors.New("--fuse needs --model: the adapter's config names no base_model")
		}
		return cli.ResolveBase(adapter, recorded)
	}
	if recorded == "" || force {
		return x.model, nil
	}
	resolved, err := cli.ResolveBase(adapter, recorded)
	if errors.Is(err, cli.ErrBaseNotFound) {
		fmt.Fprintf(x.stderr, "note: the adapter's base_model %s is not on this machine; cannot check that --model %s is that base\n", recorded, x.model)
		return x.model, nil
	}
	if err != nil {
		return "", err
	}
	if !cli.SameDir(resolved, x.model) {
		return "", fmt.Errorf("--model %s is not the adapter's base_model %s: fusing into another base of the same shape gives a model that is neither; pass --force-base if it is the same model in another place", x.model, recorded)
	}
	return x.model, nil
}

// fuseTensors is lora.FuseTensors computed in float32 and stored in the checkpoint's
// dtypes: the adapted modules' weights (or quantization scales and biases) are widened to
// float32 first and the results narrowed back to the stored dtype once at the end. mlx-lm
// works in the stored dtype throughout (bfloat16 dequantization, factors cast to bfloat16
// before the product), which rounds several times; one rounding is closer to base+adapter.
// Re-quantization itself stays lossy either way: MLX's affine quantizer nudges each
// group's scale so that its edge and 0.0 fall on codes, so even an unchanged weight can
// come back on a slightly different grid.
func fuseTensors(cfg *dg.Config, raw map[string]*mx.Array, f *lora.AdapterFile, dequantize bool) (map[string]*mx.Array, *dg.Config, error) {
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
	out, fcfg, err := lora.FuseTensors(cfg, wide, f, dequantize)
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
		if !en.Type().IsRegular() || strings.HasPrefix(name, ".") || name == configFile ||
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
func fusedConfigJSON(orig []byte, before, after *dg.Quantization) ([]byte, error) {
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
func sameQuantization(a, b *dg.Quantization) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// probe loads the base with the adapter mounted and the fused checkpoint in dir (with the
// normal loader), runs both on the same seeded input and returns the largest absolute
// logit difference, the largest absolute logit of base+adapter, and the adapter's own
// effect (the largest difference between base+adapter and the base alone).
func (x *exporter) probe(baseDir, fusedDir string, f *lora.AdapterFile) (diff, scale, effect float64, err error) {
	base, err := dg.Load(x.e, baseDir, dg.LoadOptions{})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("probe: base model: %w", err)
	}
	prompt, canvas := probeInput(base.Config, x.seed)
	plain := forward(base, prompt, canvas)
	if _, err := lora.Mount(base, f); err != nil {
		return 0, 0, 0, fmt.Errorf("probe: %w", err)
	}
	fused, err := dg.Load(x.e, fusedDir, dg.LoadOptions{})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("probe: the fused checkpoint does not load: %w", err)
	}
	want := forward(base, prompt, canvas)
	got := forward(fused, prompt, canvas)
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return 0, 0, 0, fmt.Errorf("probe: non-finite logits at %d (fused %v, base+adapter %v)", i, got[i], want[i])
		}
		diff = max(diff, d)
		scale = max(scale, math.Abs(float64(want[i])))
		effect = max(effect, math.Abs(float64(want[i])-float64(plain[i])))
	}
	return diff, scale, effect, nil
}

func forward(m *dg.Model, prompt, canvas []int32) []float32 {
	e := m.Engine
	return m.Forward(mx.FromInt32(e, prompt, 1, len(prompt)), mx.FromInt32(e, canvas, 1, len(canvas))).Float32s()
}

func probeCanvasLen(cfg *dg.Config) int { return min(probeCanvas, cfg.CanvasLength) }

// probeInput draws the probe's prompt and canvas ids from seed: uniform over the
// vocabulary, skipping the image placeholder ids, which would ask for an image.
func probeInput(cfg *dg.Config, seed uint64) (prompt, canvas []int32) {
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
