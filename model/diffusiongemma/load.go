package diffusiongemma

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// LoadOptions tunes Load.
type LoadOptions struct {
	// DType is the compute dtype unquantized tensors (and quantization scales) are cast
	// to; zero means float32.
	DType mx.DType
	// SkipVision loads the text model only, ignoring any vision tower: for text-only use,
	// or a checkpoint whose tower this code cannot read.
	SkipVision bool
	// Quantize, when set, quantizes an unquantized checkpoint while loading it
	// (quantize_on_load) exactly as `convert` with the same recipe would on disk:
	// the same modules, codes, scales and storage dtype.
	Quantize *QuantRecipe
}

// Load reads a checkpoint directory: config.json (+ generation_config.json) and
// safetensors weights (sharded through model.safetensors.index.json or not), in the MLX
// layout or the raw Hugging Face one (see sanitize.go).
func Load(e mx.Engine, dir string, opt LoadOptions) (*Model, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	ck, err := mx.OpenCheckpoint(e, dir)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	defer ck.Close()
	names, err := sanitize(cfg, ck, opt.SkipVision)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	var weights map[string]*mx.Array
	var casts []cast
	if opt.Quantize != nil {
		weights, casts, err = loadQuantizing(e, cfg, ck, names, *opt.Quantize)
	} else {
		weights, err = loadAsStored(ck, names)
	}
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	m, ws, err := build(e, cfg, weights, opt)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	releaseCast(append(casts, ws.casts...))
	return m, nil
}

// cast is a tensor converted to another dtype while loading: the original is read from
// the checkpoint and, once the copy exists, no longer needed.
type cast struct{ from, to *mx.Array }

// releaseCast computes the copies and frees their originals, one tensor at a time, so
// that at most one copy is made beyond the checkpoint's own tensors. Casts are lazy on
// the mlx engine: left alone, the copy is made by the first step, and the original stays
// in MLX's memory until Go's collector finds its handle — with a float32 checkpoint at
// bfloat16 compute, both dtypes of every weight through the first steps (the bench
// preset's MLX peak on the GPU: 0.70 GiB where its bfloat16 weights and step need 0.49).
// On the go engine both are no-ops.
func releaseCast(casts []cast) {
	for _, c := range casts {
		mx.Eval(c.to)
		c.from.Free()
	}
}

// loadAsStored reads the tensors as the checkpoint stores them, keyed by the names Build
// expects. An engine that reads files itself (the mlx engine) reads them straight into
// its memory; the go engine maps them in place where it can (mx.Checkpoint.LoadAll).
func loadAsStored(ck *mx.Checkpoint, names map[string]string) (map[string]*mx.Array, error) {
	stored := make([]string, 0, len(names))
	for _, s := range names {
		stored = append(stored, s)
	}
	slices.Sort(stored)
	loaded, err := ck.LoadAll(slices.Compact(stored))
	if err != nil {
		return nil, err
	}
	weights := make(map[string]*mx.Array, len(names))
	for name, s := range names {
		weights[name] = loaded[s]
	}
	return weights, nil
}

// loadQuantizing is quantize_on_load: it plans the recipe over the checkpoint's tensors,
// sets cfg.Quantization to the map convert would write, and quantizes each planned
// weight through ConvertTensor, as convert does; the other tensors are cast to the
// storage dtype convert would store them in.
func loadQuantizing(e mx.Engine, cfg *Config, ck *mx.Checkpoint, names map[string]string, r QuantRecipe) (map[string]*mx.Array, []cast, error) {
	if cfg.Quantization != nil {
		return nil, nil, fmt.Errorf("quantize_on_load: %w: the checkpoint is already quantized (config.json has a quantization map); drop quantize_on_load", ErrRecipe)
	}
	dt, err := cfg.StorageDType()
	if err != nil {
		return nil, nil, err
	}
	shapes := make(map[string][]int, len(names))
	dtypes := make(map[string]mx.DType, len(names))
	for name, stored := range names {
		d, shape, err := ck.Info(stored)
		if err != nil {
			return nil, nil, err
		}
		shapes[name], dtypes[name] = shape, d
	}
	plans, q, err := PlanQuantization(cfg, r, shapes)
	if err != nil {
		return nil, nil, fmt.Errorf("quantize_on_load: %w", err)
	}
	// The tensors kept as they are go through loadAsStored (read by the engine where it
	// reads files itself); the quantized ones stream through ConvertTensor below.
	kept := map[string]string{}
	for name, stored := range names {
		if p, planned := plans[strings.TrimSuffix(name, ".weight")]; !planned || p.Bits == 0 {
			kept[name] = stored
		}
	}
	weights, err := loadAsStored(ck, kept)
	if err != nil {
		return nil, nil, err
	}
	var casts []cast
	for name, a := range weights {
		if dt != nil && a.DType().IsFloat() && a.DType() != *dt {
			weights[name] = mx.AsType(a, *dt)
			casts = append(casts, cast{from: a, to: weights[name]})
		}
	}
	for name, stored := range names {
		module := strings.TrimSuffix(name, ".weight")
		p, planned := plans[module]
		if !planned || p.Bits == 0 {
			continue
		}
		if !dtypes[name].IsFloat() {
			return nil, nil, fmt.Errorf("quantize_on_load: tensor %s has dtype %s, want a float type", stored, dtypes[name])
		}
		wShape, sShape, err := QuantizedTensorShapes(shapes[name], p)
		if err != nil {
			return nil, nil, fmt.Errorf("quantize_on_load: %s: %w", module, err)
		}
		sdt := dtypes[name]
		if dt != nil {
			sdt = *dt
		}
		pieces := [3][]byte{
			make([]byte, prodInt(wShape)*4),
			make([]byte, prodInt(sShape)*sdt.Size()),
			make([]byte, prodInt(sShape)*sdt.Size()),
		}
		// pread, chunk by chunk, as convert reads: through the memory map every page of the
		// bf16 checkpoint stayed resident in the process (peak RSS 77 GB for the real
		// 26B-A4B's 50 GB, against 28 GB for its converted copy).
		src := TensorSource{DType: dtypes[name], Shape: shapes[name], Read: func(dst []byte, off int64) error {
			return ck.ReadAt(stored, dst, off)
		}}
		err = ConvertTensor(e, src, dt, p, func(piece int, off int64, b []byte) error {
			copy(pieces[piece][off:], b)
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("quantize_on_load: %s: %w", module, err)
		}
		weights[module+".weight"] = mx.FromBytes(e, pieces[PieceWeight], wShape, mx.Uint32)
		weights[module+".scales"] = mx.FromBytes(e, pieces[PieceScales], sShape, sdt)
		weights[module+".biases"] = mx.FromBytes(e, pieces[PieceBiases], sShape, sdt)
	}
	cfg.Quantization = q
	return weights, casts, nil
}

func prodInt(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// weightSet hands out tensors by name and remembers problems, so that one error can
// list every missing, unexpected or misshapen tensor.
type weightSet struct {
	w        map[string]*mx.Array
	used     map[string]bool
	problems []string
	cfg      *Config
	dt       mx.DType
	casts    []cast // the tensors param and quantized converted to dt
}

func (ws *weightSet) fail(format string, args ...any) {
	ws.problems = append(ws.problems, fmt.Sprintf(format, args...))
}

// param returns an unquantized tensor with the expected shape, cast to the compute dtype.
func (ws *weightSet) param(name string, shape ...int) *mx.Array {
	a, ok := ws.w[name]
	if !ok {
		ws.fail("missing tensor %s", name)
		return nil
	}
	ws.used[name] = true
	if !slices.Equal(a.Shape(), shape) {
		ws.fail("tensor %s has shape %v, want %v", name, a.Shape(), shape)
		return nil
	}
	if !a.DType().IsFloat() {
		ws.fail("tensor %s has dtype %s, want a float type", name, a.DType())
		return nil
	}
	return ws.cast(a)
}

// cast returns a in the compute dtype, remembering a copy and its original.
func (ws *weightSet) cast(a *mx.Array) *mx.Array {
	c := mx.AsType(a, ws.dt)
	if c != a {
		ws.casts = append(ws.casts, cast{from: a, to: c})
	}
	return c
}

// quantized returns the packed triple of module if its .scales exist (nil otherwise),
// checking bits and group size against the quantization map and the shapes.
func (ws *weightSet) quantized(module string, logical []int) *Quantized {
	sc, ok := ws.w[module+".scales"]
	if !ok {
		return nil
	}
	w, okW := ws.w[module+".weight"]
	b, okB := ws.w[module+".biases"]
	ws.used[module+".scales"] = true
	ws.used[module+".weight"] = okW
	ws.used[module+".biases"] = okB
	if !okW || !okB {
		ws.fail("quantized module %s needs .weight, .scales and .biases", module)
		return nil
	}
	if w.DType() != mx.Uint32 {
		ws.fail("tensor %s.weight has dtype %s, want uint32 (packed)", module, w.DType())
		return nil
	}
	in := logical[len(logical)-1]
	lead := logical[:len(logical)-1]
	ws2, ss := w.Shape(), sc.Shape()
	if len(ws2) != len(logical) || len(ss) != len(logical) || !slices.Equal(ws2[:len(ws2)-1], lead) || !slices.Equal(ss[:len(ss)-1], lead) || !slices.Equal(b.Shape(), ss) {
		ws.fail("quantized module %s: weight %v, scales %v, biases %v do not fit logical shape %v", module, ws2, ss, b.Shape(), logical)
		return nil
	}
	group := 64
	bits := 0
	if q := ws.cfg.Quantization; q != nil {
		qb, qg, isQ := q.For(module)
		if isQ {
			bits, group = qb, qg
		}
	}
	if group == 0 {
		group = 64
	}
	ib, iin, err := InferBits(ws2[len(ws2)-1], ss[len(ss)-1], group)
	if err != nil {
		ws.fail("quantized module %s: %v", module, err)
		return nil
	}
	if iin != in {
		ws.fail("quantized module %s: shapes imply input size %d, config implies %d", module, iin, in)
		return nil
	}
	if bits != 0 && bits != ib {
		ws.fail("quantized module %s: quantization config says %d bits, shapes say %d (weight %v, scales %v, group %d)", module, bits, ib, ws2, ss, group)
		return nil
	}
	return &Quantized{W: w, Scales: ws.cast(sc), Biases: ws.cast(b), Bits: ib, GroupSize: group}
}

// linear returns a quantized or dense linear [out, in].
func (ws *weightSet) linear(module string, out, in int) Linear {
	if q := ws.quantized(module, []int{out, in}); q != nil {
		return q
	} else if _, isQ := ws.w[module+".scales"]; isQ {
		return nil
	}
	if d := ws.param(module+".weight", out, in); d != nil {
		return &Dense{W: d}
	}
	return nil
}

func (ws *weightSet) experts(module string, shape ...int) *ExpertWeight {
	if q := ws.quantized(module, shape); q != nil {
		return &ExpertWeight{Quant: q}
	} else if _, isQ := ws.w[module+".scales"]; isQ {
		return nil
	}
	if d := ws.param(module+".weight", shape...); d != nil {
		return &ExpertWeight{Dense: d}
	}
	return nil
}

// Build assembles a model from named tensors (a checkpoint's contents). Every expected
// tensor must be present and every present tensor used; the error lists all problems.
// The vision tower is built when the config has a vision_config, the tensors include any
// vision tensor (then all of them must be there) and opt.SkipVision is false; otherwise
// vision tensors are ignored and the model is text-only.
func Build(e mx.Engine, cfg *Config, weights map[string]*mx.Array, opt LoadOptions) (*Model, error) {
	m, _, err := build(e, cfg, weights, opt)
	return m, err
}

// build is Build, also returning the weight set with the casts it made.
func build(e mx.Engine, cfg *Config, weights map[string]*mx.Array, opt LoadOptions) (*Model, *weightSet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	dt := opt.DType
	if dt == 0 {
		dt = mx.Float32
	}
	t := &cfg.TextConfig
	ws := &weightSet{w: weights, used: map[string]bool{}, cfg: cfg, dt: dt}
	m := &Model{Config: cfg, Engine: e, SelfCond: &SelfConditioning{}, EncoderScalars: make([]*mx.Array, t.NumHiddenLayers)}
	for i := range t.NumHiddenLayers {
		m.Layers = append(m.Layers, &Layer{Index: i, Full: t.IsFull(i), Heads: t.NumAttentionHeads, KVHeads: t.LayerKVHeads(i),
			HeadDim: t.LayerHeadDim(i), ropeFreqs: ropePeriods(e, t.RopeInvFreqs(i))})
	}
	for r := range textTensors(t, t.NumHiddenLayers) {
		shape, s := r.def.shape(t, r.layer), r.def.slot(m, r.layer)
		switch r.def.kind {
		case KindParam:
			*s.array = ws.param(r.name, shape...)
		case KindLinear:
			*s.linear = ws.linear(r.module, shape[0], shape[1])
		case KindExperts:
			*s.experts = ws.experts(r.module, shape...)
		case KindEmbedding:
			if q := ws.quantized(r.module, shape); q != nil {
				*s.embed = &Embedding{Quant: q}
			} else if _, isQ := ws.w[r.module+".scales"]; isQ {
				// quantized has reported the problem; the packed weight is no dense table.
			} else if d := ws.param(r.name, shape...); d != nil {
				*s.embed = &Embedding{Dense: d}
			}
		}
	}
	if cfg.VisionConfig != nil && !opt.SkipVision && hasVisionTensor(weights) {
		m.Vision = buildVision(ws, cfg)
	}
	var unexpected []string
	for n := range weights {
		// Without a built tower, vision tensors are ignored (a text-only use of a
		// multimodal checkpoint); with one, every vision tensor must be used.
		if !ws.used[n] && (m.Vision != nil || !IsVisionTensor(n)) {
			unexpected = append(unexpected, n)
		}
	}
	sort.Strings(unexpected)
	for _, n := range unexpected {
		ws.fail("unexpected tensor %s", n)
	}
	if len(ws.problems) > 0 {
		const show = 20
		msg := ws.problems
		extra := ""
		if len(msg) > show {
			extra = fmt.Sprintf("\n  ... and %d more", len(msg)-show)
			msg = msg[:show]
		}
		return nil, nil, errors.New("diffusiongemma: checkpoint does not match config:\n  " + strings.Join(msg, "\n  ") + extra)
	}
	return m, ws, nil
}
