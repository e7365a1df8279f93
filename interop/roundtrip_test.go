package interop

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// The PEFT round trip: dgtune's `export --format peft` of a shared and of a separate
// adapter, mounted with PeftModel.from_pretrained on transformers' model (peft_roundtrip.py,
// whose output is testdata/roundtrip/transformers.safetensors), must give dgtune's logits.
const roundTrip = "testdata/roundtrip"

// roundTripAdapter attaches the deterministic adapter of a round-trip mode to m: rank 4,
// scale 2, the default keys, B random.
func roundTripAdapter(t *testing.T, m *dg.Model, mode string) *lora.Adapter {
	t.Helper()
	cfg := lora.Config{Rank: 4, Scale: 2, Encoder: mode}
	a, err := lora.Attach(m, cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(17, uint64(len(mode))))
	p := a.Params()
	for _, n := range a.Names() {
		if strings.HasSuffix(n, ".lora_b") {
			p[n] = mx.MulScalar(mxtest.RandN(m.Engine, rng, p[n].Shape()...), 0.2)
		}
	}
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPEFTExportRoundTrip: the committed exports are what ExportPEFT writes today (so the
// files transformers mounted are this code's), and transformers + PEFT's logits on them
// equal dgtune's.
func TestPEFTExportRoundTrip(t *testing.T) {
	e := mxtest.Go(t)
	ref := reference(t, e)
	prompt, canvas := need(t, ref, "short.prompt"), need(t, ref, "short.canvas")
	write := os.Getenv("DGTUNE_WRITE_ROUNDTRIP") != ""
	var got map[string]*mx.Array
	if !write {
		var err error
		if got, _, err = mx.LoadSafetensors(e, filepath.Join(roundTrip, "transformers.safetensors")); err != nil {
			t.Fatalf("%v (run interop/peft_roundtrip.py where transformers is installed)", err)
		}
	}
	for _, mode := range []string{lora.EncoderModeShared, lora.EncoderModeSeparate} {
		t.Run(mode, func(t *testing.T) {
			m := load(t, e, "text-f32")
			a := roundTripAdapter(t, m, mode)
			dir := filepath.Join(roundTrip, mode)
			if write {
				if err := lora.ExportPEFT(a.File("text-f32"), dir, "text-f32"); err != nil {
					t.Fatal(err)
				}
				return
			}
			fresh := t.TempDir()
			if err := lora.ExportPEFT(a.File("text-f32"), fresh, "text-f32"); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{lora.PEFTWeightsFile, lora.ConfigFile} {
				committed, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				now, err := os.ReadFile(filepath.Join(fresh, name))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(committed, now) {
					t.Errorf("%s/%s differs from what ExportPEFT writes now: regenerate with DGTUNE_WRITE_ROUNDTRIP=1 and re-run peft_roundtrip.py", dir, name)
				}
			}
			wantAbs(t, "PeftModel.from_pretrained(dgtune export) logits", m.Forward(prompt, canvas), need(t, got, mode+".logits"), 2e-4)
			if d, _ := maxAbsDiff(t, "base", load(t, e, "text-f32").Forward(prompt, canvas), need(t, got, mode+".logits")); d < 1e-2 {
				t.Errorf("the adapter barely changes transformers' logits (%.3g): the check proves nothing", d)
			}
		})
	}
}
