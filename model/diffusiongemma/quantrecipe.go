package diffusiongemma

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// Recipes of `convert --bits` and of quantize_on_load.
const (
	// Recipe4 quantizes every quantizable module to 4 bits at the recipe's group size.
	Recipe4 = "4"
	// Recipe8 quantizes every quantizable module to 8 bits.
	Recipe8 = "8"
	// RecipeMixed is mlx-vlm's own quant_predicate for DiffusionGemma — what
	// `mlx_vlm.convert -q` writes for this model: 8 bits at group 64 for the embedding,
	// every self_attn projection, the dense MLP and the router; the recipe's 4 bits and
	// group size for the rest (experts, self-conditioning MLP, the vision projection).
	RecipeMixed = "mixed"
)

// QuantRecipe says which modules a conversion quantizes, and how. The eligible modules
// are those MLX's nn.quantize can quantize (see QuantizableModule); of those, a module is
// left unquantized when a Keep pattern names it or when its input size is not a multiple
// of the group size (MLX's rule: mlx-lm and mlx-vlm skip such modules silently; here they
// get an explicit `false` in the quantization map).
type QuantRecipe struct {
	Bits      string   // Recipe4, Recipe8 or RecipeMixed
	GroupSize int      // 32, 64 or 128
	Keep      []string // module patterns left unquantized (see KeepMatches)
}

// ErrRecipe reports a recipe the converter cannot run.
var ErrRecipe = errors.New("quantization recipe")

// Validate checks bits, group size and the keep patterns.
func (r QuantRecipe) Validate() error {
	switch r.Bits {
	case Recipe4, Recipe8, RecipeMixed:
	default:
		return fmt.Errorf("%w: bits %q: want 4, 8 or mixed", ErrRecipe, r.Bits)
	}
	if !validGroupSize(r.GroupSize) {
		return fmt.Errorf("%w: group size %d: want 32, 64 or 128", ErrRecipe, r.GroupSize)
	}
	for _, p := range r.Keep {
		if p == "" {
			return fmt.Errorf("%w: empty keep pattern", ErrRecipe)
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("%w: keep pattern %q: %v", ErrRecipe, p, err)
		}
	}
	return nil
}

// KeepMatches reports whether a keep pattern names module. A pattern with a glob
// character (* ? [) is matched against the whole module path with path.Match (a * also
// spans dots: "model.decoder.layers.0.*", "*.router.proj"); a plain pattern names the
// module of that path or any module whose path ends in "."+pattern ("embed_tokens",
// "self_attn.o_proj", "layers.3.mlp.down_proj").
func KeepMatches(pattern, module string) bool {
	if strings.ContainsAny(pattern, "*?[") {
		ok, _ := path.Match(pattern, module)
		return ok
	}
	return module == pattern || strings.HasSuffix(module, "."+pattern)
}

// ModuleQuant is the plan for one quantizable module: Bits 0 keeps it unquantized, and
// Why says why (for the convert summary).
type ModuleQuant struct {
	Bits      int
	GroupSize int
	Why       string
}

// Plan decides one module's quantization from its path and input size (the weight's last
// dimension).
func (r QuantRecipe) Plan(module string, in int) ModuleQuant {
	for _, p := range r.Keep {
		if KeepMatches(p, module) {
			return ModuleQuant{Why: fmt.Sprintf("--keep %s", p)}
		}
	}
	// MLX checks the default group size before asking the model's predicate.
	if in%r.GroupSize != 0 {
		return ModuleQuant{Why: fmt.Sprintf("input size %d is not a multiple of group size %d", in, r.GroupSize)}
	}
	q := ModuleQuant{Bits: 4, GroupSize: r.GroupSize}
	switch {
	case r.Bits == Recipe8:
		q.Bits = 8
	case r.Bits == RecipeMixed && mixedHighBits(module):
		q = ModuleQuant{Bits: 8, GroupSize: 64}
	}
	if in%q.GroupSize != 0 {
		return ModuleQuant{Why: fmt.Sprintf("input size %d is not a multiple of group size %d", in, q.GroupSize)}
	}
	return q
}

// mixedHighBits is mlx-vlm's DiffusionGemma quant_predicate: the modules it sends to
// 8 bits.
func mixedHighBits(module string) bool {
	for _, s := range []string{"embed_tokens", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} {
		if strings.HasSuffix(module, s) {
			return true
		}
	}
	return strings.Contains(module, ".self_attn.") || strings.Contains(module, "router")
}

// defaultBits is the map's top-level bits: what mlx-vlm writes for --q-bits.
func (r QuantRecipe) defaultBits() int {
	if r.Bits == Recipe8 {
		return 8
	}
	return 4
}

// PlanQuantization plans every quantizable tensor among shapes (the MLX names of a
// checkpoint's tensors, with their logical shapes) and returns the plans by module and
// the quantization map a checkpoint quantized by them carries.
//
// Quantizable are the weights MLX's nn.quantize can quantize: the Linear, Embedding and
// SwitchLinear modules of the text model (the embedding, the self-conditioning MLP, each
// layer's attention projections, dense MLP, router projection and experts) and the vision
// embedder's projection. Norms, scalars and router scales are no such modules; the vision
// tower's linears are, but mlx-vlm skips them (skip_multimodal_module), so they stay as
// stored, as in every mlx-community conversion. A keep pattern that names no quantizable
// module is an error (a typo would otherwise quantize what the user meant to keep).
func PlanQuantization(cfg *Config, r QuantRecipe, shapes map[string][]int) (map[string]ModuleQuant, *Quantization, error) {
	if err := r.Validate(); err != nil {
		return nil, nil, err
	}
	quantizable := map[string]bool{EmbedVisionPrefix + ".embedding_projection.weight": true}
	for _, ts := range ExpectedTensors(cfg) {
		if ts.Quantizable {
			quantizable[ts.Name] = true
		}
	}
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	plans := map[string]ModuleQuant{}
	q := &Quantization{GroupSize: r.GroupSize, Bits: r.defaultBits(), Mode: QuantModeAffine}
	for _, n := range names {
		if !quantizable[n] || len(shapes[n]) < 2 {
			continue
		}
		module := strings.TrimSuffix(n, ".weight")
		p := r.Plan(module, shapes[n][len(shapes[n])-1])
		plans[module] = p
		var entry *ModuleQuantization
		switch {
		case p.Bits == 0:
			entry = &ModuleQuantization{Quantized: false}
		case p.Bits != q.Bits || p.GroupSize != q.GroupSize:
			entry = &ModuleQuantization{Quantized: true, Bits: p.Bits, GroupSize: p.GroupSize}
		}
		if entry != nil {
			if q.Modules == nil {
				q.Modules = map[string]ModuleQuantization{}
			}
			q.Modules[module] = *entry
		}
	}
	for _, p := range r.Keep {
		matched := false
		for m := range plans {
			matched = matched || KeepMatches(p, m)
		}
		if !matched {
			return nil, nil, fmt.Errorf("%w: keep pattern %q matches no quantizable module (patterns name modules such as %s or embed_tokens)",
				ErrRecipe, p, LayerPrefix(0)+".self_attn.q_proj")
		}
	}
	return plans, q, nil
}

// StorageDType is the dtype a conversion stores unquantized tensors and quantization
// scales in, when the user names none: the config's torch_dtype, else its dtype, else
// text_config.dtype — as mlx-lm and mlx-vlm read it (they look at torch_dtype, then
// text_config's dtype). Nil means none is given: each tensor keeps its stored dtype.
func (c *Config) StorageDType() (*mx.DType, error) {
	for _, s := range []string{c.TorchDtype, c.Dtype, c.TextConfig.Dtype} {
		if s == "" {
			continue
		}
		dt, err := ParseStorageDType(s)
		if err != nil {
			return nil, fmt.Errorf("config.json dtype: %w", err)
		}
		return &dt, nil
	}
	return nil, nil
}

// ParseStorageDType maps a dtype name (as config.json and --dtype spell it) to a dtype.
func ParseStorageDType(s string) (mx.DType, error) {
	switch s {
	case "bfloat16":
		return mx.BFloat16, nil
	case "float16":
		return mx.Float16, nil
	case "float32":
		return mx.Float32, nil
	}
	return 0, fmt.Errorf("%q is not bfloat16, float16 or float32", s)
}

// TensorSource is one stored tensor a conversion reads: its dtype and shape, and a
// reader of its raw little-endian bytes.
type TensorSource struct {
	DType mx.DType
	Shape []int
	Read  func(dst []byte, off int64) error
}

// Converted pieces of a tensor, as ConvertTensor emits them.
const (
	PieceWeight = iota // the (cast or packed) weight
	PieceScales
	PieceBiases
)

// ChunkBytes is how much of a source tensor ConvertTensor reads at a time: the peak
// memory of a conversion is a few times this, whatever the tensor's size.
const ChunkBytes = 64 << 20

// ConvertTensor streams src through e in row chunks: each chunk is cast to dt (a float
// tensor only, and only when dt is non-nil and differs) and, when q.Bits > 0, quantized with
// MLX's affine rule along the last axis; emit receives each piece's bytes with their
// offset in that piece. Quantizing row by row is exact: MLX quantizes each group of a
// row on its own, so the pieces equal one call over the whole tensor.
func ConvertTensor(e mx.Engine, src TensorSource, dt *mx.DType, q ModuleQuant, emit func(piece int, off int64, b []byte) error) error {
	return convertTensor(e, src, dt, q, emit, ChunkBytes)
}

func convertTensor(e mx.Engine, src TensorSource, storeAs *mx.DType, q ModuleQuant, emit func(piece int, off int64, b []byte) error, chunkBytes int) error {
	shape := src.Shape
	cols := 1
	if len(shape) > 0 {
		cols = shape[len(shape)-1]
	}
	rows := 1
	for _, d := range shape[:max(len(shape)-1, 0)] {
		rows *= d
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	dt := src.DType
	if storeAs != nil && src.DType.IsFloat() {
		dt = *storeAs
	}
	rowBytes := cols * src.DType.Size()
	step := max(1, chunkBytes/rowBytes)
	buf := make([]byte, min(step, rows)*rowBytes)
	var outW, outS int // bytes per row of the weight and of scales/biases
	if q.Bits > 0 {
		outW = cols * q.Bits / 32 * 4
		outS = cols / q.GroupSize * dt.Size()
	} else {
		outW = cols * dt.Size()
	}
	for r0 := 0; r0 < rows; r0 += step {
		n := min(step, rows-r0)
		chunk := buf[:n*rowBytes]
		if err := src.Read(chunk, int64(r0)*int64(rowBytes)); err != nil {
			return err
		}
		a := mx.FromBytes(e, chunk, []int{n, cols}, src.DType)
		if dt != src.DType {
			c := mx.AsType(a, dt)
			a.Free()
			a = c
		}
		if q.Bits == 0 {
			b := mx.Bytes(a)
			a.Free()
			if err := emit(PieceWeight, int64(r0)*int64(outW), b); err != nil {
				return err
			}
			continue
		}
		w, s, bi := mx.Quantize(a, q.GroupSize, q.Bits)
		mx.Eval(w, s, bi)
		a.Free()
		pieces := []struct {
			piece int
			a     *mx.Array
			row   int
		}{{PieceWeight, w, outW}, {PieceScales, s, outS}, {PieceBiases, bi, outS}}
		for _, p := range pieces {
			b := mx.Bytes(p.a)
			p.a.Free()
			if err := emit(p.piece, int64(r0)*int64(p.row), b); err != nil {
				return err
			}
		}
	}
	return nil
}

// QuantizedTensorShapes returns the stored pieces of a tensor of logical shape converted
// by q into dt: one weight of the logical shape in dt, or the packed triple.
func QuantizedTensorShapes(logical []int, q ModuleQuant) (weight, scales []int, err error) {
	if q.Bits == 0 {
		return slices.Clone(logical), nil, nil
	}
	return QuantizedShapes(logical, q.Bits, q.GroupSize)
}
