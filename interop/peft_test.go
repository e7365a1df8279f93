package interop

import (
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/objective"
)

// shortExample is the reference corruption of hf_golden.py's short prompt.
func shortExample(t *testing.T, ref map[string]*mx.Array) (objective.Example, objective.Corruption) {
	t.Helper()
	ex := objective.Example{Prompt: need(t, ref, "short.prompt").Int32s(), Target: need(t, ref, "short.target").Int32s()}
	c := objective.Corruption{Canvas: need(t, ref, "short.canvas").Int32s()}
	for _, v := range need(t, ref, "short.corrupt").Int32s() {
		c.Corrupt = append(c.Corrupt, v != 0)
	}
	return ex, c
}

// lossAndGrads runs the reference objective on the adapted model and returns the loss and
// d loss / d parameter for every adapter tensor, by dgtune name.
func lossAndGrads(m *dg.Model, a *lora.Adapter, ex objective.Example, c objective.Corruption) (float64, map[string]*mx.Array) {
	params := a.Params()
	names := a.Names()
	args := make([]*mx.Array, len(names))
	for i, n := range names {
		args[i] = params[n]
	}
	obj := objective.Reference(0.4, 0.8)
	vg := mx.ValueAndGrad(func(in []*mx.Array) []*mx.Array {
		traced := map[string]*mx.Array{}
		for i, n := range names {
			traced[n] = in[i]
		}
		if err := a.SetParams(traced); err != nil {
			panic(err)
		}
		loss, _ := objective.BatchLoss([]objective.Terms{obj.ExampleTerms(m, ex, c)})
		return []*mx.Array{loss}
	})
	vals, grads := vg(args)
	if err := a.SetParams(params); err != nil {
		panic(err)
	}
	out := map[string]*mx.Array{}
	for i, n := range names {
		out[n] = grads[i]
	}
	return vals[0].Item(), out
}

// peftGrad returns transformers + PEFT's gradient for a dgtune tensor name, in dgtune's
// orientation ([in, r] / [r, out]); pass chooses the decoder's or the encoder's module.
func peftGrad(t *testing.T, e mx.Engine, ref map[string]*mx.Array, variant, name string, encoder bool) *mx.Array {
	t.Helper()
	mod, suffix := strings.TrimSuffix(name, ".lora_a"), ".lora_A.weight"
	if strings.HasSuffix(name, ".lora_b") {
		mod, suffix = strings.TrimSuffix(name, ".lora_b"), ".lora_B.weight"
	}
	if encoder {
		if enc, ok := dg.EncoderModule(mod); ok {
			mod = enc
		}
	}
	return mx.Transpose(need(t, ref, variant+".grad.base_model.model."+mod+suffix))
}

// wantRel fails unless max |got − want| ≤ tol · max |want| (or ≤ 1e-7 when want is zero:
// the encoder's last layer reaches the loss only through its k/v projections).
func wantRel(t *testing.T, what string, got, want *mx.Array, tol float64) float64 {
	t.Helper()
	d, s := maxAbsDiff(t, what, got, want)
	if !(d <= tol*s || d <= 1e-7) {
		t.Errorf("%s: max |dgtune − PEFT| = %.3g, %.3g of max |PEFT| = %.3g, want ≤ %g", what, d, d/s, s, tol)
	}
	if s == 0 {
		return 0
	}
	return d / s
}

// TestPEFTAdaptersFromTransformers mounts the three adapters PEFT saved on transformers'
// model — decoder modules only, encoder and decoder modules with equal values, and
// independent ones — and compares logits, the denoising loss and every LoRA gradient with
// transformers + PEFT autograd.
func TestPEFTAdaptersFromTransformers(t *testing.T) {
	e := mxtest.Go(t)
	ref := reference(t, e)
	ex, c := shortExample(t, ref)
	for _, tt := range []struct {
		variant  string
		separate bool // dgtune reads it as an adapter whose encoder pass has its own weights
		tensors  int  // dgtune's parameter tensors
	}{
		{"peft-decoder", true, 40}, // the encoder pass is not adapted, as in transformers
		{"peft-equal", false, 40},  // one shared set, used by both passes
		{"peft-separate", true, 80},
	} {
		t.Run(tt.variant, func(t *testing.T) {
			m := load(t, e, "text-f32")
			f, err := lora.LoadDir(e, filepath.Join(golden, tt.variant))
			if err != nil {
				t.Fatal(err)
			}
			if f.Separate() != tt.separate || f.Scale() != 3 || f.Rank() != 4 {
				t.Errorf("loaded: separate %v, scale %v, rank %d; want %v, 3 (lora_alpha 12 / r 4), 4", f.Separate(), f.Scale(), f.Rank(), tt.separate)
			}
			a, err := lora.Mount(m, f)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(a.Params()); n != tt.tensors {
				t.Errorf("%d adapter tensors, want %d", n, tt.tensors)
			}
			got := m.Forward(mx.FromInt32(e, ex.Prompt, 1, len(ex.Prompt)), mx.FromInt32(e, c.Canvas, 1, len(c.Canvas)))
			wantAbs(t, "logits", got, need(t, ref, tt.variant+".logits"), 2e-4)

			loss, grads := lossAndGrads(m, a, ex, c)
			wantLoss := float64(need(t, ref, tt.variant+".loss").Float32s()[0])
			t.Logf("loss: dgtune %.7g, transformers + PEFT %.7g", loss, wantLoss)
			if math.Abs(loss-wantLoss) > 2e-4 {
				t.Errorf("loss = %.7g, transformers + PEFT %.7g", loss, wantLoss)
			}
			worst := 0.0
			for _, n := range slices.Sorted(maps.Keys(grads)) {
				var want *mx.Array
				switch {
				case strings.HasPrefix(n, dg.EncoderLayersPrefix):
					d, _ := dg.DecoderModule(strings.TrimSuffix(strings.TrimSuffix(n, ".lora_a"), ".lora_b"))
					want = peftGrad(t, e, ref, tt.variant, d+n[strings.LastIndex(n, "."):], true)
				case tt.separate:
					want = peftGrad(t, e, ref, tt.variant, n, false)
				default:
					// One shared set gets both passes' gradients.
					want = mx.Add(peftGrad(t, e, ref, tt.variant, n, false), peftGrad(t, e, ref, tt.variant, n, true))
				}
				worst = max(worst, wantRel(t, "grad "+n, grads[n], want, 2e-3))
			}
			t.Logf("%d gradients: worst max|Δ|/max|PEFT| = %.3g", len(grads), worst)
		})
	}
}

// TestPEFTBadTargets: a PEFT adapter whose target_modules names nothing in the model is
// refused with one line that says so, before anything is attached.
func TestPEFTBadTargets(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	for _, name := range []string{lora.PEFTWeightsFile, lora.ConfigFile} {
		b, err := os.ReadFile(filepath.Join(golden, "peft-decoder", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == lora.ConfigFile {
			var cfg map[string]any
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			cfg["target_modules"] = `^model\.decoder\.layers\.(?:7|8)\.self_attn\.q_proj$`
			if b, err = json.Marshal(cfg); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := lora.LoadDir(e, dir)
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, e, "text-f32")
	_, err = lora.Mount(m, f)
	if err == nil {
		t.Fatal("Mount accepted target_modules that name nothing")
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	if !strings.Contains(first, "names no linear of this model (3 layers") {
		t.Errorf("first line %q does not say what is wrong", first)
	}
}
