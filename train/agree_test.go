package train

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestSharedStateRoundTrip: what rank 0 hands the other ranks on resume decodes to its
// training state, bit for bit; no state and a bad state are passed on as such.
func TestSharedStateRoundTrip(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	best := 1.25
	st := State{Step: 7, Position: data.Position{Epoch: 1, Offset: 3}, Seed: 9, LearningRate: 1e-3, TrainedTokens: 1234,
		BestValLoss: &best, Window: []float64{0.1, 0.30000000000000004}, OptimizerStep: 7, FineTuneType: "lora",
		ParamFingerprints: []string{"a[2 3]"}, WorldSize: 2}
	// A negative zero must cross bit for bit (-0.0 in Go source is +0: the constant has no sign).
	negZero := float32(math.Copysign(0, -1))
	params := map[string]*mx.Array{"a": mx.FromFloat32(e, []float32{1, negZero, 3.5e-39, 4, 5, 6}, 2, 3)}
	opt := map[string]*mx.Array{"m.a": mx.FromFloat32(e, []float32{-1, 2, -3, 4, -5, 6}, 2, 3), "step": mx.FromInt32(e, []int32{7})}
	if err := saveState(dir, st, params, opt); err != nil {
		t.Fatal(err)
	}
	gotSt, gotP, gotO, err := decodeShared(e, encodeShared(e, dir, true))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotSt, st) {
		t.Errorf("state %+v, want %+v", gotSt, st)
	}
	for _, pair := range []struct{ got, want map[string]*mx.Array }{{gotP, params}, {gotO, opt}} {
		if !slices.Equal(sortedNames(pair.got), sortedNames(pair.want)) {
			t.Fatalf("names %v, want %v", sortedNames(pair.got), sortedNames(pair.want))
		}
		for n, a := range pair.want {
			b := pair.got[n]
			if string(mx.Bytes(a)) != string(mx.Bytes(b)) || !slices.Equal(a.Shape(), b.Shape()) || a.DType() != b.DType() {
				t.Errorf("%s: %v %s %v, want %v %s %v", n, b.Shape(), b.DType(), b.Float32s(), a.Shape(), a.DType(), a.Float32s())
			}
		}
	}
	// Not resuming, or nothing to resume: every rank starts fresh.
	for _, resume := range []bool{false, true} {
		if _, _, _, err := decodeShared(e, encodeShared(e, t.TempDir(), resume)); !errors.Is(err, errNoState) {
			t.Errorf("resume %v, no state: err = %v", resume, err)
		}
	}
	// A state rank 0 cannot read is the same error on every rank.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, StateFile), []byte("not safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := decodeShared(e, encodeShared(e, bad, true)); err == nil || !strings.HasPrefix(err.Error(), "rank 0: resume: ") {
		t.Errorf("bad state: err = %v", err)
	}
	if _, _, _, err := decodeShared(e, []byte{1, 0}); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated: err = %v", err)
	}
}

// TestAgreedKeys: paths and what only rank 0 uses may differ between ranks; the rest
// of the settings may not.
func TestAgreedKeys(t *testing.T) {
	keys := agreedKeys()
	for _, k := range []string{"model", "data", "adapter_path", "resume", "backend", "distributed", "eval.split"} {
		if slices.Contains(keys, k) {
			t.Errorf("%s must be allowed to differ", k)
		}
	}
	for _, k := range []string{"seed", "batch_size", "learning_rate", "lora_parameters.rank", "max_canvas", "shuffle"} {
		if !slices.Contains(keys, k) {
			t.Errorf("%s must agree", k)
		}
	}
	a := []data.Pair{{Index: 0, Prompt: []int32{1, 2}, Target: []int32{3}}, {Index: 1, Prompt: []int32{4}, Target: []int32{5, 6}}}
	b := []data.Pair{{Index: 0, Prompt: []int32{1}, Target: []int32{2, 3}}, {Index: 1, Prompt: []int32{4}, Target: []int32{5, 6}}}
	if slices.Equal(pairsDigest(a), pairsDigest(b)) {
		t.Error("the digest does not see where the prompt ends")
	}
	if !slices.Equal(pairsDigest(a), pairsDigest(slices.Clone(a))) {
		t.Error("the digest is not a function of the pairs")
	}
}
