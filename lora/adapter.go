package lora

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// Sentinel errors; the returned errors wrap them with the details.
var (
	// ErrMismatch: adapter tensors do not fit the model (names or shapes).
	ErrMismatch = errors.New("adapter does not fit the model")
	// ErrFormat: a file is not a LoRA adapter this package can read.
	ErrFormat = errors.New("not a readable LoRA adapter")
)

// Tensor suffixes of the mlx-lm/optiq layout.
const (
	suffixA = ".lora_a"
	suffixB = ".lora_b"
)

// planTargets lists the linears an adapter built from c adapts on a model of config mcfg —
// from the config alone, no weights — in target order (layer, then canonical key).
func planTargets(mcfg *diffusiongemma.Config, c Config) ([]diffusiongemma.LoRATarget, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	targets, err := diffusiongemma.LoRATargets(mcfg, c.keys(), c.numLayers())
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("lora: keys %v on the last %d layers select no linear", c.keys(), c.NumLayers)
	}
	return targets, nil
}

// Adapter is a set of LoRA layers installed in a model's linear slots.
type Adapter struct {
	cfg     Config
	modules []string // model order
	layers  map[string]*Linear
	slots   map[string]*diffusiongemma.Linear
}

// Attach wraps every target linear of m (diffusiongemma.LoRATargets with cfg's keys and
// num_layers) in a fresh LoRA layer, in place. A ~ U(−1/√in, +1/√in) drawn from one subkey
// of mx.Key(seed) per target, in target order; B = 0, so the adapted model computes exactly
// what the base did. Nothing is changed when an error is returned.
func Attach(m *diffusiongemma.Model, cfg Config, seed uint64) (*Adapter, error) {
	targets, err := planTargets(m.Config, cfg)
	if err != nil {
		return nil, err
	}
	slots := make([]*diffusiongemma.Linear, len(targets))
	var problems []string
	for i, t := range targets {
		slot, err := m.LinearSlot(t.Module)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if in, out := (*slot).Dims(); in != t.In || out != t.Out {
			problems = append(problems, fmt.Sprintf("%s: model linear is [%d, %d] (in, out), config implies [%d, %d]",
				t.Module, in, out, t.In, t.Out))
		}
		slots[i] = slot
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("lora: attach: %w:\n  %s", ErrMismatch, strings.Join(problems, "\n  "))
	}
	e := m.Engine
	keys := mx.SplitKey(mx.Key(e, seed), len(targets))
	a := newAdapter(cfg)
	for i, t := range targets {
		bound := 1 / math.Sqrt(float64(t.In))
		a.install(t.Module, slots[i], &Linear{
			A:       mx.Uniform(keys[i], []int{t.In, cfg.Rank}, -bound, bound, mx.Float32),
			B:       mx.Zeros(e, []int{cfg.Rank, t.Out}, mx.Float32),
			Scale:   cfg.Scale,
			Dropout: cfg.Dropout,
		})
	}
	return a, nil
}

// newAdapter records cfg resolved: keys in canonical order, num_layers −1 for "all".
func newAdapter(cfg Config) *Adapter {
	cfg.Keys = cfg.keys()
	slices.SortStableFunc(cfg.Keys, func(a, b string) int { return keyIndex(a) - keyIndex(b) })
	cfg.NumLayers = cfg.numLayers()
	return &Adapter{cfg: cfg, layers: map[string]*Linear{}, slots: map[string]*diffusiongemma.Linear{}}
}

// install puts l over whatever the slot holds now (a base linear or another adapter's layer).
func (a *Adapter) install(module string, slot *diffusiongemma.Linear, l *Linear) {
	l.Base = *slot
	*slot = l
	a.modules = append(a.modules, module)
	a.layers[module] = l
	a.slots[module] = slot
}

// Mount installs the adapter f in m after checking every tensor against the model: each
// module must be a linear of m with A [in, r] and B [r, out] at the file's rank. On any
// mismatch nothing is attached and the error lists every offending tensor as
// "name: adapter [a b], model [c d]".
func Mount(m *diffusiongemma.Model, f *AdapterFile) (*Adapter, error) {
	if f == nil {
		return nil, errors.New("lora: mount: no adapter")
	}
	for _, mod := range f.ModuleNames() {
		w := f.Modules[mod]
		if w.A == nil || w.B == nil {
			return nil, fmt.Errorf("lora: mount: %w: module %s lacks lora_a or lora_b", ErrFormat, mod)
		}
		if w.A.Engine() != m.Engine || w.B.Engine() != m.Engine {
			return nil, fmt.Errorf("lora: mount: module %s: adapter arrays are on engine %s, the model on %s",
				mod, w.A.Engine().Name(), m.Engine.Name())
		}
	}
	dims := func(module string) (int, int, bool) {
		slot, err := m.LinearSlot(module)
		if err != nil {
			return 0, 0, false
		}
		in, out := (*slot).Dims()
		return in, out, true
	}
	if err := checkFit(f, dims); err != nil {
		return nil, fmt.Errorf("lora: mount: %w", err)
	}
	cfg := f.Config.LoRAConfig()
	if len(cfg.Keys) == 0 {
		cfg.Keys = f.Keys()
	}
	a := newAdapter(cfg)
	scale := f.Scale()
	for _, mod := range f.ModuleNames() {
		slot, _ := m.LinearSlot(mod) // checked above
		w := f.Modules[mod]
		a.install(mod, slot, &Linear{A: mx.AsType(w.A, mx.Float32), B: mx.AsType(w.B, mx.Float32), Scale: scale,
			Dropout: f.Config.LoRAParameters.Dropout})
	}
	return a, nil
}

// checkFit validates every tensor of f against the linear geometry dims gives (in, out
// per module path; false when the module does not exist) and f's rank.
func checkFit(f *AdapterFile, dims func(module string) (in, out int, ok bool)) error {
	if len(f.Modules) == 0 {
		return fmt.Errorf("%w: the adapter has no tensors", ErrMismatch)
	}
	r := f.Rank()
	var problems []string
	bad := 0
	for _, mod := range f.ModuleNames() {
		w := f.Modules[mod]
		in, out, ok := dims(mod)
		if !ok {
			problems = append(problems,
				fmt.Sprintf("%s%s: adapter %v, model has no linear %s", mod, suffixA, w.A.Shape(), mod),
				fmt.Sprintf("%s%s: adapter %v, model has no linear %s", mod, suffixB, w.B.Shape(), mod))
			bad++
			continue
		}
		modBad := false
		for _, c := range []struct {
			name      string
			arr       *mx.Array
			modelWant []int
		}{{mod + suffixA, w.A, []int{in, r}}, {mod + suffixB, w.B, []int{r, out}}} {
			if !slices.Equal(c.arr.Shape(), c.modelWant) {
				problems = append(problems, fmt.Sprintf("%s: adapter %v, model %v", c.name, c.arr.Shape(), c.modelWant))
				modBad = true
			} else if !c.arr.DType().IsFloat() {
				problems = append(problems, fmt.Sprintf("%s: adapter dtype %s, want a float type", c.name, c.arr.DType()))
				modBad = true
			}
		}
		if modBad {
			bad++
		}
	}
	if len(problems) == 0 {
		return nil
	}
	hint := ""
	if bad == len(f.Modules) {
		hint = " (no module fits: the adapter was made for another model geometry or rank)"
	}
	return fmt.Errorf("%w: %d of %d modules mismatch at rank %d%s:\n  %s", ErrMismatch, bad, len(f.Modules), r, hint,
		strings.Join(problems, "\n  "))
}

// Config returns the configuration the adapter was built from (keys resolved).
func (a *Adapter) Config() Config {
	c := a.cfg
	c.Keys = slices.Clone(c.Keys)
	return c
}

// Modules lists the adapted module paths in model order.
func (a *Adapter) Modules() []string { return slices.Clone(a.modules) }

// Layer returns the LoRA layer at module, or nil.
func (a *Adapter) Layer(module string) *Linear { return a.layers[module] }

// Params returns the trainable arrays by name, "<module>.lora_a" and "<module>.lora_b".
// The arrays are the ones in use (not copies).
func (a *Adapter) Params() map[string]*mx.Array {
	out := make(map[string]*mx.Array, 2*len(a.modules))
	for mod, l := range a.layers {
		out[mod+suffixA] = l.A
		out[mod+suffixB] = l.B
	}
	return out
}

// Names returns the parameter names, sorted.
func (a *Adapter) Names() []string { return slices.Sorted(maps.Keys(a.Params())) }

// NumParams is the number of trainable scalars, Σ r·(in + out).
func (a *Adapter) NumParams() int64 {
	var n int64
	for _, l := range a.layers {
		n += int64(l.A.Size()) + int64(l.B.Size())
	}
	return n
}

// SetParams installs arrays as the adapter's parameters — updated values after an
// optimizer step, or traced arrays inside mx.ValueAndGrad. It needs exactly the names of
// Params with the same shapes and float dtypes; otherwise it changes nothing and lists
// every problem.
func (a *Adapter) SetParams(p map[string]*mx.Array) error {
	cur := a.Params()
	var problems []string
	for _, n := range slices.Sorted(maps.Keys(p)) {
		old, ok := cur[n]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: not a parameter of this adapter", n))
		case p[n] == nil:
			problems = append(problems, fmt.Sprintf("%s: nil array", n))
		case !slices.Equal(p[n].Shape(), old.Shape()):
			problems = append(problems, fmt.Sprintf("%s: shape %v, want %v", n, p[n].Shape(), old.Shape()))
		case !p[n].DType().IsFloat():
			problems = append(problems, fmt.Sprintf("%s: dtype %s, want a float type", n, p[n].DType()))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(cur)) {
		if _, ok := p[n]; !ok {
			problems = append(problems, fmt.Sprintf("%s: missing", n))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("lora: set params: %w:\n  %s", ErrMismatch, strings.Join(problems, "\n  "))
	}
	for mod, l := range a.layers {
		l.A, l.B = p[mod+suffixA], p[mod+suffixB]
	}
	return nil
}

// SetTraining turns dropout on (key non-nil: one subkey per layer, in model order) or off.
func (a *Adapter) SetTraining(key *mx.Array) {
	var keys []*mx.Array
	if key != nil && len(a.modules) > 0 {
		keys = mx.SplitKey(key, len(a.modules))
	}
	for i, mod := range a.modules {
		var k *mx.Array
		if keys != nil {
			k = keys[i]
		}
		a.layers[mod].SetTraining(k)
	}
}

// Detach removes the adapter's layers from the model, restoring what each slot held
// before (the base linear, or an adapter mounted earlier); a layer another adapter was
// later stacked on is unlinked from under it. Detaching twice is a no-op.
func (a *Adapter) Detach() {
	for _, mod := range a.modules {
		l, slot := a.layers[mod], a.slots[mod]
		if *slot == diffusiongemma.Linear(l) {
			*slot = l.Base
			continue
		}
		for cur, ok := (*slot).(*Linear); ok; cur, ok = cur.Base.(*Linear) {
			if cur.Base == diffusiongemma.Linear(l) {
				cur.Base = l.Base
				break
			}
		}
	}
}

// File returns the adapter's current weights as an AdapterFile (arrays shared, not
// copied) with baseModel recorded in its config.
func (a *Adapter) File(baseModel string) *AdapterFile {
	f := &AdapterFile{Config: NewAdapterConfig(a.cfg, baseModel), Modules: map[string]Weights{}}
	for mod, l := range a.layers {
		f.Modules[mod] = Weights{A: l.A, B: l.B}
	}
	return f
}

// moduleLess orders module paths as the model does: decoder layers by number, then by the
// canonical key order; anything else after them, by name.
func moduleLess(a, b string) int {
	la, ka, oka := splitLayerModule(a)
	lb, kb, okb := splitLayerModule(b)
	switch {
	case oka && okb:
		if la != lb {
			return la - lb
		}
		ia, ib := keyIndex(ka), keyIndex(kb)
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(ka, kb)
	case oka:
		return -1
	case okb:
		return 1
	}
	return strings.Compare(a, b)
}

// splitLayerModule splits "model.decoder.layers.N.key" into N and key.
func splitLayerModule(module string) (int, string, bool) {
	rest, ok := strings.CutPrefix(module, diffusiongemma.DecoderPrefix+".layers.")
	if !ok {
		return 0, "", false
	}
	num, key, ok := strings.Cut(rest, ".")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 0 {
		return 0, "", false
	}
	return n, key, true
}

func keyIndex(key string) int {
	if i := slices.Index(diffusiongemma.LoRAKeys(), key); i >= 0 {
		return i
	}
	return len(diffusiongemma.LoRAKeys())
}
