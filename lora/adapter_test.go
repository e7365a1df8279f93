package lora

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// tensorShape names one adapter tensor and its shape.
type tensorShape struct {
	Name  string
	Shape []int
}

// planTensors lists the tensors an adapter built from c has on a model of config mcfg, A before
// B: "<module>.lora_a" [in, r] and "<module>.lora_b" [r, out].
func planTensors(mcfg *diffusiongemma.Config, c Config) ([]tensorShape, error) {
	targets, err := planTargets(mcfg, c)
	if err != nil {
		return nil, err
	}
	out := make([]tensorShape, 0, 2*len(targets))
	for _, t := range targets {
		out = append(out,
			tensorShape{Name: t.Module + suffixA, Shape: []int{t.In, c.Rank}},
			tensorShape{Name: t.Module + suffixB, Shape: []int{c.Rank, t.Out}})
	}
	return out, nil
}

func TestPlanRealGeometry(t *testing.T) {
	cfg, err := diffusiongemma.Preset(diffusiongemma.PresetReal)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planTensors(cfg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	// 25 sliding layers × 7 keys + 5 full layers × 6 (no v_proj) = 205 linears, 410 tensors.
	if len(plan) != 410 {
		t.Fatalf("len(Plan) = %d, want 410", len(plan))
	}
	// §6.1 shapes at r = 8 (hidden 2816; sliding: 16 heads × 256 = 4096 q, 8 kv × 256 = 2048;
	// full: 16 × 512 = 8192 q, 2 × 512 = 1024 kv; dense MLP 2112). Layer 5 is full
	// (pattern [sliding×5, full]), layer 0 sliding.
	want := map[string][]int{
		"model.decoder.layers.0.self_attn.q_proj.lora_a": {2816, 8},
		"model.decoder.layers.0.self_attn.q_proj.lora_b": {8, 4096},
		"model.decoder.layers.0.self_attn.k_proj.lora_b": {8, 2048},
		"model.decoder.layers.0.self_attn.v_proj.lora_a": {2816, 8},
		"model.decoder.layers.0.self_attn.v_proj.lora_b": {8, 2048},
		"model.decoder.layers.0.self_attn.o_proj.lora_a": {4096, 8},
		"model.decoder.layers.0.self_attn.o_proj.lora_b": {8, 2816},
		"model.decoder.layers.0.mlp.gate_proj.lora_a":    {2816, 8},
		"model.decoder.layers.0.mlp.gate_proj.lora_b":    {8, 2112},
		"model.decoder.layers.0.mlp.up_proj.lora_b":      {8, 2112},
		"model.decoder.layers.0.mlp.down_proj.lora_a":    {2112, 8},
		"model.decoder.layers.0.mlp.down_proj.lora_b":    {8, 2816},
		"model.decoder.layers.5.self_attn.q_proj.lora_b": {8, 8192},
		"model.decoder.layers.5.self_attn.k_proj.lora_b": {8, 1024},
		"model.decoder.layers.5.self_attn.o_proj.lora_a": {8192, 8},
		"model.decoder.layers.29.mlp.down_proj.lora_b":   {8, 2816},
	}
	got := map[string][]int{}
	var total int64
	for _, ts := range plan {
		if _, dup := got[ts.Name]; dup {
			t.Fatalf("duplicate tensor %s", ts.Name)
		}
		got[ts.Name] = ts.Shape
		total += int64(ts.Shape[0] * ts.Shape[1])
	}
	for n, s := range want {
		if !slices.Equal(got[n], s) {
			t.Errorf("%s: shape %v, want %v", n, got[n], s)
		}
	}
	for _, full := range []int{5, 11, 17, 23, 29} {
		if _, ok := got[fmt.Sprintf("model.decoder.layers.%d.self_attn.v_proj.lora_a", full)]; ok {
			t.Errorf("full layer %d has a v_proj adapter", full)
		}
	}
	// §5.3: 25 × 306,688 + 5 × 325,120 = 9,292,800 trainable parameters.
	if total != 9292800 {
		t.Errorf("parameters = %d, want 9292800", total)
	}
	if plan[0].Name != "model.decoder.layers.0.self_attn.q_proj.lora_a" || plan[409].Name != "model.decoder.layers.29.mlp.down_proj.lora_b" {
		t.Errorf("order: first %s, last %s", plan[0].Name, plan[409].Name)
	}
}

func TestPlanErrors(t *testing.T) {
	cfg, err := diffusiongemma.Preset(diffusiongemma.PresetTiny)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"zero rank", Config{Rank: 0, Scale: 8}, "rank 0 must be at least 1"},
		{"nan scale", Config{Rank: 4, Scale: math.NaN()}, "scale NaN must be finite"},
		{"dropout 1", Config{Rank: 4, Scale: 1, Dropout: 1}, "dropout 1 must be in [0, 1)"},
		{"unknown key", Config{Rank: 4, Scale: 1, Keys: []string{"mlp.fc1"}}, `lora key "mlp.fc1"`},
		{"expert key", Config{Rank: 4, Scale: 1, Keys: []string{"experts.down_proj"}}, `lora key "experts.down_proj"`},
		{"too many layers", Config{Rank: 4, Scale: 1, NumLayers: 3}, "num_layers 3"},
		{"negative layers", Config{Rank: 4, Scale: 1, NumLayers: -2}, "num_layers -2"},
		// tiny: layer 1 (the last) is full and has no v_proj.
		{"selects nothing", Config{Rank: 4, Scale: 1, Keys: []string{"self_attn.v_proj"}, NumLayers: 1}, "select no linear"},
	} {
		_, err := planTargets(cfg, tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: planTargets error = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestAttachZeroBIsBase(t *testing.T) {
	e := mxtest.Go(t)
	for _, bits := range []string{"0", "4", "mixed"} {
		m := tinyModel(t, e, bits)
		base := logits(m)
		a, err := Attach(m, Config{Rank: 4, Scale: 8}, 0)
		if err != nil {
			t.Fatal(err)
		}
		// B = 0: the residual is exactly +0, so every logit keeps its bits.
		assertBitwise(t, "bits "+bits+" adapted", logits(m), base)
		a.Detach()
		assertBitwise(t, "bits "+bits+" detached", logits(m), base)
	}
}

func TestAttachInit(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	a, err := Attach(m, Config{Rank: 4, Scale: 8}, 42)
	if err != nil {
		t.Fatal(err)
	}
	// tiny: hidden 64, 4 heads; layer 0 sliding (head_dim 16, 2 kv heads), layer 1 full
	// (head_dim 32, 1 kv head), intermediate 128. Σ(in+out):
	// layer 0: q 64+64, k 64+32, v 64+32, o 64+64, gate/up 64+128 twice, down 128+64 = 1024;
	// layer 1: q 64+128, k 64+32, o 128+64, gate/up/down 3×192 = 1056. r = 4: 4·2080 = 8320.
	if n := a.NumParams(); n != 8320 {
		t.Errorf("NumParams() = %d, want 8320", n)
	}
	names := a.Names()
	if len(names) != 26 || !slices.IsSorted(names) {
		t.Errorf("Names() = %d names (sorted %v), want 26 sorted", len(names), slices.IsSorted(names))
	}
	for _, mod := range a.Modules() {
		l := a.Layer(mod)
		in, _ := l.Dims()
		bound := float32(1 / math.Sqrt(float64(in)))
		av := l.A.Float32s()
		spread := float32(0)
		for _, v := range av {
			if v < -bound || v > bound {
				t.Fatalf("%s: A entry %v outside ±%v", mod, v, bound)
			}
			spread = max(spread, v)
		}
		// With in·r ≥ 128 uniform draws, the largest is above bound/2 unless the draw is broken.
		if spread < bound/2 {
			t.Errorf("%s: max A entry %v, want the draws to spread over ±%v", mod, spread, bound)
		}
		for _, v := range l.B.Float32s() {
			if v != 0 {
				t.Fatalf("%s: B not zero", mod)
			}
		}
		if l.Scale != 8 || l.A.DType() != mx.Float32 || l.B.DType() != mx.Float32 {
			t.Errorf("%s: scale %v, dtypes %s/%s", mod, l.Scale, l.A.DType(), l.B.DType())
		}
	}
	a.Detach()
	again, err := Attach(m, Config{Rank: 4, Scale: 8}, 42)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Attach(m, Config{Rank: 4, Scale: 8}, 43)
	if err != nil {
		t.Fatal(err)
	}
	mod := "model.decoder.layers.1.mlp.down_proj"
	x, y, z := a.Layer(mod).A.Float32s(), again.Layer(mod).A.Float32s(), other.Layer(mod).A.Float32s()
	if !slices.Equal(x, y) {
		t.Error("same seed gave different A")
	}
	if slices.Equal(x, z) {
		t.Error("different seeds gave the same A")
	}
}

func TestSetParams(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	a, err := Attach(m, Config{Rank: 2, Scale: 1, Keys: []string{"self_attn.q_proj"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	q0 := "model.decoder.layers.0.self_attn.q_proj"
	good := a.Params()
	for _, tc := range []struct {
		name string
		edit func(p map[string]*mx.Array)
		want []string
	}{
		{"unknown", func(p map[string]*mx.Array) { p["x.lora_a"] = good[q0+".lora_a"] }, []string{"x.lora_a: not a parameter"}},
		{"missing", func(p map[string]*mx.Array) { delete(p, q0+".lora_b") }, []string{q0 + ".lora_b: missing"}},
		{"shape", func(p map[string]*mx.Array) { p[q0+".lora_a"] = mx.Zeros(e, []int{2, 64}, mx.Float32) },
			[]string{q0 + ".lora_a: shape [2 64], want [64 2]"}},
		{"dtype", func(p map[string]*mx.Array) { p[q0+".lora_b"] = mx.Zeros(e, []int{2, 64}, mx.Int32) },
			[]string{q0 + ".lora_b: dtype int32"}},
		{"nil and missing", func(p map[string]*mx.Array) { p[q0+".lora_a"] = nil; delete(p, q0+".lora_b") },
			[]string{q0 + ".lora_a: nil array", q0 + ".lora_b: missing"}},
	} {
		p := a.Params()
		tc.edit(p)
		err := a.SetParams(p)
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: SetParams error = %v, want ErrMismatch", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
		if a.Layer(q0).A != good[q0+".lora_a"] || a.Layer(q0).B != good[q0+".lora_b"] {
			t.Errorf("%s: a failed SetParams changed the parameters", tc.name)
		}
	}
	p := a.Params()
	p[q0+".lora_b"] = mx.Ones(e, []int{2, 64}, mx.Float32)
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
	if a.Layer(q0).B != p[q0+".lora_b"] {
		t.Error("SetParams did not install the array")
	}
}

func TestDetachStacked(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	before := baseTypes(t, m)
	base := logits(m)
	a1, err := Attach(m, Config{Rank: 2, Scale: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a1, 1, 0.1)
	only1 := logits(m)
	a2, err := Attach(m, Config{Rank: 3, Scale: 2, Keys: []string{"self_attn.o_proj", "mlp.down_proj"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a2, 2, 0.1)
	if maxAbsDiff(logits(m), only1) == 0 {
		t.Fatal("the stacked adapter changed nothing")
	}
	// Remove the bottom one first: a2 must stay active alone, over the base linears.
	a1.Detach()
	slot, _ := m.LinearSlot("model.decoder.layers.0.self_attn.o_proj")
	if top, ok := (*slot).(*Linear); !ok || top != a2.Layer("model.decoder.layers.0.self_attn.o_proj") || top.Base != before["model.decoder.layers.0.self_attn.o_proj"] {
		t.Fatalf("after detaching the bottom adapter the slot holds %T", *slot)
	}
	a2.Detach()
	a2.Detach() // no-op
	assertSlotsUnchanged(t, m, before)
	assertBitwise(t, "after detaching both", logits(m), base)
}

func TestGradientThroughForward(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "4")
	a, err := Attach(m, Config{Rank: 2, Scale: 8}, 5)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a, 3, 0.05)
	names := a.Names()
	orig := a.Params()
	args := make([]*mx.Array, len(names))
	for i, n := range names {
		args[i] = orig[n]
	}
	prompt := mx.FromInt32(e, []int32{2, 105, 7, 8, 9}, 1, 5)
	canvas := mx.FromInt32(e, []int32{5, 9, 300, 4}, 1, 4)
	r := mxtest.RandN(e, rand.New(rand.NewPCG(9, 9)), 1, 4, m.Config.TextConfig.VocabSize)
	f := func(in []*mx.Array) []*mx.Array {
		p := make(map[string]*mx.Array, len(in))
		for i, n := range names {
			p[n] = in[i]
		}
		if err := a.SetParams(p); err != nil {
			panic(err)
		}
		return []*mx.Array{mx.Sum(mx.Multiply(m.Forward(prompt, canvas), r), false)}
	}
	_, grads := mx.ValueAndGrad(f)(args)
	if err := a.SetParams(orig); err != nil {
		t.Fatal(err)
	}
	for i, g := range grads {
		if g == nil {
			t.Fatalf("%s: no gradient", names[i])
		}
		if !slices.Equal(g.Shape(), args[i].Shape()) {
			t.Fatalf("%s: gradient shape %v, want %v", names[i], g.Shape(), args[i].Shape())
		}
		nonzero := false
		for _, v := range g.Float32s() {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: non-finite gradient", names[i])
			}
			nonzero = nonzero || v != 0
		}
		if !nonzero {
			t.Errorf("%s: gradient is all zero", names[i])
		}
	}
}

func TestMountMismatch(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	before := baseTypes(t, m)
	q0 := "model.decoder.layers.0.self_attn.q_proj"
	k1 := "model.decoder.layers.1.self_attn.k_proj"
	zeros := func(s ...int) *mx.Array { return mx.Zeros(e, s, mx.Float32) }
	file := func(rank int, mods map[string]Weights) *AdapterFile {
		return &AdapterFile{Config: NewAdapterConfig(Config{Rank: rank, Scale: 1}, ""), Modules: mods}
	}
	small, err := diffusiongemma.Preset(diffusiongemma.PresetSmall)
	if err != nil {
		t.Fatal(err)
	}
	smallPlan, err := planTensors(small, Config{Rank: 4, Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	smallFile := file(4, map[string]Weights{})
	for i := 0; i < len(smallPlan); i += 2 {
		mod := strings.TrimSuffix(smallPlan[i].Name, suffixA)
		smallFile.Modules[mod] = Weights{A: zeros(smallPlan[i].Shape...), B: zeros(smallPlan[i+1].Shape...)}
	}
	for _, tc := range []struct {
		name string
		f    *AdapterFile
		want []string
	}{
		{"wrong rank shapes", file(4, map[string]Weights{
			q0: {A: zeros(64, 4), B: zeros(8, 64)},   // B at rank 8
			k1: {A: zeros(64, 2), B: zeros(2, 32)}}), // both at rank 2
			[]string{q0 + ".lora_b: adapter [8 64], model [4 64]", k1 + ".lora_a: adapter [64 2], model [64 4]",
				k1 + ".lora_b: adapter [2 32], model [4 32]", "2 of 2 modules"}},
		{"unknown module", file(4, map[string]Weights{
			q0: {A: zeros(64, 4), B: zeros(4, 64)},
			"model.decoder.layers.1.self_attn.v_proj": {A: zeros(64, 4), B: zeros(4, 32)}, // full layer: no v_proj
			"model.decoder.layers.7.mlp.up_proj":      {A: zeros(64, 4), B: zeros(4, 128)}}),
			[]string{"model.decoder.layers.1.self_attn.v_proj.lora_a: adapter [64 4], model has no linear",
				"model.decoder.layers.1.self_attn.v_proj.lora_b: adapter [4 32], model has no linear",
				"model.decoder.layers.7.mlp.up_proj.lora_a: adapter [64 4], model has no linear", "2 of 3 modules"}},
		{"wrong in/out", file(4, map[string]Weights{q0: {A: zeros(32, 4), B: zeros(4, 48)}}),
			[]string{q0 + ".lora_a: adapter [32 4], model [64 4]", q0 + ".lora_b: adapter [4 48], model [4 64]"}},
		// small: hidden 256, head_dim 64, 6 layers (5 sliding × 7 keys + 1 full × 6 = 41
		// modules); every module is wrong or absent on tiny.
		{"other geometry", smallFile,
			[]string{"model.decoder.layers.0.self_attn.q_proj.lora_a: adapter [256 4], model [64 4]",
				"model.decoder.layers.5.mlp.down_proj.lora_b: adapter [4 256], model has no linear",
				"41 of 41 modules", "another model geometry"}},
	} {
		a, err := Mount(m, tc.f)
		if a != nil || !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: Mount = %v, %v; want ErrMismatch", tc.name, a, err)
			continue
		}
		var me *MismatchError
		if !errors.As(err, &me) {
			t.Errorf("%s: %v is not a *MismatchError", tc.name, err)
			continue
		}
		all := strings.Join(me.Problems, "\n") + fmt.Sprintf("\n%d of %d modules", me.BadModules, me.Modules) + "\n" + err.Error()
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: error lacks %q:\n%v", tc.name, w, all)
			}
		}
		if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "the first "+me.Problems[0]) {
			t.Errorf("%s: error is not one line naming the first problem: %q", tc.name, err)
		}
		assertSlotsUnchanged(t, m, before)
	}
	// The error keeps every offender (the small adapter has 41 modules, 82 tensors) and
	// says in one short line which base the adapter was trained on and the first.
	smallFile.Config.BaseModel = "/models/small"
	_, err = Mount(m, smallFile)
	var me *MismatchError
	if !errors.As(err, &me) || len(me.Problems) != 82 {
		t.Fatalf("other geometry: %v, want 82 problems", err)
	}
	want := "lora: mount: adapter does not fit the model: the adapter was trained on /models/small, another model geometry or rank; " +
		"41 of 41 modules differ at rank 4, the first model.decoder.layers.0.self_attn.q_proj.lora_a: adapter [256 4], model [64 4]"
	if err.Error() != want {
		t.Errorf("other geometry:\n got %s\nwant %s", err, want)
	}
	if _, err := Mount(m, nil); err == nil {
		t.Error("Mount(nil) succeeded")
	}
	if _, err := Mount(m, file(4, map[string]Weights{q0: {A: zeros(64, 4)}})); !errors.Is(err, ErrFormat) {
		t.Errorf("Mount without B: %v, want ErrFormat", err)
	}
}

func TestAttachModelDisagreesWithConfig(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	// A model whose layer-0 q_proj is [10, 64] although its config implies [64, 64].
	m.Layers[0].Q = &diffusiongemma.Dense{W: mx.Zeros(e, []int{10, 64}, mx.Float32)}
	before := baseTypes(t, m)
	a, err := Attach(m, Config{Rank: 2, Scale: 1}, 0)
	if a != nil || !errors.Is(err, ErrMismatch) ||
		!strings.Contains(err.Error(), "model.decoder.layers.0.self_attn.q_proj: model linear is [64, 10] (in, out), config implies [64, 64]") {
		t.Fatalf("Attach = %v, %v; want a mismatch naming q_proj", a, err)
	}
	assertSlotsUnchanged(t, m, before)
}
