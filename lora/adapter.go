package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
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
// num_layers) in a fresh LoRA layer, in place. A is drawn as cfg.Init says — U(−1/√in, +1/√in)
// (kaiming_uniform, the default), N(0, 2/(in+r)) (xavier_normal) or N(0, 1/r²) (gaussian) —
// from one subkey of mx.Key(seed) per target, in target order; B = 0, so the adapted model computes exactly
// what the base did. With cfg.Encoder separate the encoder pass gets its own pair, drawn
// the same way from the other half of the target's subkey. Nothing is changed when an error
// is returned.
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
		l := &Linear{Scale: cfg.Scale, Dropout: cfg.Dropout, B: mx.Zeros(e, []int{cfg.Rank, t.Out}, mx.Float32)}
		if cfg.separate() {
			// The two passes' A come from the two halves of the target's key.
			ks := mx.SplitKey(keys[i], 2)
			l.A = drawA(cfg, ks[0], t.In)
			l.Encoder = EncoderOwn
			l.EncA = drawA(cfg, ks[1], t.In)
			l.EncB = mx.Zeros(e, []int{cfg.Rank, t.Out}, mx.Float32)
		} else {
			l.A = drawA(cfg, keys[i], t.In)
		}
		a.install(t.Module, slots[i], l)
	}
	return a, nil
}

// drawA draws one A [in, r] from key as cfg.Init says. The three are the initialisations
// of A in PEFT (kaiming_uniform_ with a = √5 on [r, in], whose bound is 1/√in; normal_ with
// std 1/r) and NeMo AutoModel (xavier_normal_ on [r, in]: std √(2/(fan_in + fan_out)) =
// √(2/(in + r))); the layout [in, r] changes neither fan.
func drawA(cfg Config, key *mx.Array, in int) *mx.Array {
	shape := []int{in, cfg.Rank}
	var std float64
	switch cfg.Init {
	case InitXavierNormal:
		std = math.Sqrt(2 / float64(in+cfg.Rank))
	case InitGaussian:
		std = 1 / float64(cfg.Rank)
	default:
		bound := 1 / math.Sqrt(float64(in))
		return mx.Uniform(key, shape, -bound, bound, mx.Float32)
	}
	return mx.MulScalar(mx.Normal(key, shape, mx.Float32), std)
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
		slot, err := m.LinearSlot(slotModule(module))
		if err != nil {
			return 0, 0, false
		}
		in, out := (*slot).Dims()
		return in, out, true
	}
	if err := checkTargets(m, f.TargetModules); err != nil {
		return nil, fmt.Errorf("lora: mount: %w", err)
	}
	if err := checkFit(f, dims); err != nil {
		return nil, fmt.Errorf("lora: mount: %w", err)
	}
	cfg := f.Config.LoRAConfig()
	if len(cfg.Keys) == 0 {
		cfg.Keys = f.Keys()
	}
	sep := f.Separate()
	if sep {
		cfg.Encoder = EncoderModeSeparate
	}
	a := newAdapter(cfg)
	scale := f.Scale()
	for _, mod := range f.slotModules() {
		slot, _ := m.LinearSlot(mod) // checked above
		l := &Linear{Scale: scale, Dropout: f.Config.LoRAParameters.Dropout}
		if w, ok := f.Modules[mod]; ok {
			l.A, l.B = mx.AsType(w.A, mx.Float32), mx.AsType(w.B, mx.Float32)
		}
		if sep {
			l.Encoder = EncoderNone
			if enc, ok := diffusiongemma.EncoderModule(mod); ok {
				if w, ok := f.Modules[enc]; ok {
					l.Encoder, l.EncA, l.EncB = EncoderOwn, mx.AsType(w.A, mx.Float32), mx.AsType(w.B, mx.Float32)
				}
			}
		}
		a.install(mod, slot, l)
	}
	return a, nil
}

// slotModule maps an adapter module to the model linear it acts on: the encoder pass's
// modules act on the decoder layer's linear (both passes run the same layers).
func slotModule(module string) string {
	if d, ok := diffusiongemma.DecoderModule(module); ok {
		return d
	}
	return module
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
	return &MismatchError{BaseModel: f.Config.BaseModel, Rank: r, Modules: len(f.Modules), BadModules: bad, Problems: problems}
}

// MismatchError is an adapter that does not fit the model: every offending tensor is in
// Problems ("NAME: adapter [a b], model [c d]"), but the message names only the base the
// adapter was trained on and the first: an adapter from another model lists every one of
// its tensors, one line of kilobytes that hides the cause. It is an ErrMismatch.
type MismatchError struct {
	BaseModel           string // the adapter's recorded base_model, "" when it has none
	Rank                int
	Modules, BadModules int
	Problems            []string
}

func (e *MismatchError) Error() string {
	trained := "the adapter records no base_model"
	if e.BaseModel != "" {
		trained = "the adapter was trained on " + e.BaseModel
	}
	if e.BadModules == e.Modules {
		trained += ", another model geometry or rank"
	}
	return fmt.Sprintf("%v: %s; %d of %d modules differ at rank %d, the first %s", ErrMismatch, trained, e.BadModules, e.Modules, e.Rank, e.Problems[0])
}

func (e *MismatchError) Unwrap() error { return ErrMismatch }

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
		if l.A != nil {
			out[mod+suffixA] = l.A
			out[mod+suffixB] = l.B
		}
		if l.Encoder == EncoderOwn {
			enc := encoderName(mod)
			out[enc+suffixA] = l.EncA
			out[enc+suffixB] = l.EncB
		}
	}
	return out
}

// encoderName is the adapter-file name of module's encoder-pass weights.
func encoderName(module string) string {
	enc, ok := diffusiongemma.EncoderModule(module)
	if !ok {
		panic("lora: no encoder pass for module " + module) // only decoder-layer linears get EncoderOwn
	}
	return enc
}

// Names returns the parameter names, sorted.
func (a *Adapter) Names() []string { return slices.Sorted(maps.Keys(a.Params())) }

// NumParams is the number of trainable scalars, Σ r·(in + out).
func (a *Adapter) NumParams() int64 {
	var n int64
	for _, p := range a.Params() {
		n += int64(p.Size())
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
		if l.A != nil {
			l.A, l.B = p[mod+suffixA], p[mod+suffixB]
		}
		if l.Encoder == EncoderOwn {
			enc := encoderName(mod)
			l.EncA, l.EncB = p[enc+suffixA], p[enc+suffixB]
		}
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
		if l.A != nil {
			f.Modules[mod] = Weights{A: l.A, B: l.B}
		}
		if l.Encoder == EncoderOwn {
			f.Modules[encoderName(mod)] = Weights{A: l.EncA, B: l.EncB}
		}
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
		if c := strings.Compare(ka, kb); c != 0 {
			return c
		}
		return strings.Compare(b, a) // "model.decoder…" before "model.encoder…"
	case oka:
		return -1
	case okb:
		return 1
	}
	return strings.Compare(a, b)
}

// splitLayerModule splits "model.decoder.layers.N.key" (or the encoder pass's
// "model.encoder.language_model.layers.N.key") into N and key.
func splitLayerModule(module string) (int, string, bool) {
	module = slotModule(module)
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

// checkTargets checks that a PEFT adapter's target_modules (raw JSON: a regex PEFT
// full-matches, or a list of names PEFT matches exactly or as a dotted suffix) names at
// least one LoRA-capable linear of m in either pass, as PEFT insists when it mounts one.
// A regex Go cannot compile (Python-only syntax) is not checked here; the tensors are.
func checkTargets(m *diffusiongemma.Model, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var match func(string) bool
	var regex string
	var list []string
	switch {
	case json.Unmarshal(raw, &regex) == nil:
		re, err := regexp.Compile("^(?:" + regex + ")$")
		if err != nil {
			return nil
		}
		match = re.MatchString
	case json.Unmarshal(raw, &list) == nil:
		match = func(n string) bool {
			return slices.ContainsFunc(list, func(t string) bool { return n == t || strings.HasSuffix(n, "."+t) })
		}
	default:
		return fmt.Errorf("%w: target_modules %s: want a string or a list of strings", ErrFormat, raw)
	}
	var names []string
	for i := range m.Layers {
		for _, key := range diffusiongemma.LoRAKeys() {
			mod := diffusiongemma.LayerPrefix(i) + "." + key
			if _, err := m.LinearSlot(mod); err != nil {
				continue
			}
			enc, _ := diffusiongemma.EncoderModule(mod)
			names = append(names, mod, enc)
		}
	}
	if len(names) == 0 || slices.ContainsFunc(names, match) {
		return nil
	}
	return fmt.Errorf("%w: PEFT target_modules %s names no linear of this model (%d layers; e.g. %s)", ErrMismatch, raw, len(m.Layers), names[0])
}
