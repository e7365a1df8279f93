//go:build mlx

package mlxeng_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/safetensors"
)

// stTensors are tensors of every dtype both readers take, with random bytes (floats
// include NaN and infinity bit patterns, which a copy must keep as they are), and a
// scalar and an empty tensor.
func stTensors(seed uint64) []safetensors.Tensor {
	rng := rand.New(rand.NewPCG(seed, 3))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	bools := random(6)
	for i := range bools {
		bools[i] &= 1
	}
	return []safetensors.Tensor{
		{Name: "f32", DType: safetensors.F32, Shape: []int{3, 5}, Data: random(60)},
		{Name: "bf16", DType: safetensors.BF16, Shape: []int{4, 3, 2}, Data: random(48)},
		{Name: "f16", DType: safetensors.F16, Shape: []int{7}, Data: random(14)},
		{Name: "u32", DType: safetensors.U32, Shape: []int{2, 4}, Data: random(32)},
		{Name: "i32", DType: safetensors.I32, Shape: []int{5}, Data: random(20)},
		{Name: "i64", DType: safetensors.I64, Shape: []int{3}, Data: random(24)},
		{Name: "u8", DType: safetensors.U8, Shape: []int{9}, Data: random(9)},
		{Name: "bool", DType: safetensors.BOOL, Shape: []int{2, 3}, Data: bools},
		{Name: "scalar", DType: safetensors.F32, Shape: []int{}, Data: random(4)},
		{Name: "empty", DType: safetensors.F32, Shape: []int{0, 4}, Data: nil},
	}
}

// TestLoadSafetensorsFile: MLX's reader gives each tensor the header's dtype and shape
// and the file's bytes exactly, over a sharded checkpoint; a subset loads alone.
func TestLoadSafetensorsFile(t *testing.T) {
	e := mlxEngine(t)
	ts := stTensors(1)
	dir := filepath.Join(t.TempDir(), "model")
	if err := safetensors.WriteShards(dir, ts, 64, nil); err != nil {
		t.Fatal(err)
	}
	ck, err := mx.OpenCheckpoint(e, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	got, err := ck.LoadAll(ck.Names())
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, got, ts)

	// One file directly: only what was asked for comes back.
	st, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	file, _ := st.FileOf("f32")
	hs, err := e.LoadSafetensorsFile(file, []string{"f32"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 {
		t.Errorf("LoadSafetensorsFile(%s, [f32]) returned %d tensors, want 1", file, len(hs))
	}
	checkLoaded(t, map[string]*mx.Array{"f32": mx.Wrap(e, hs["f32"])}, ts[:1])

	if _, err := e.LoadSafetensorsFile(file, []string{"absent"}); err == nil {
		t.Errorf("LoadSafetensorsFile(%s, [absent]) succeeded", file)
	}
}

func checkLoaded(t *testing.T, got map[string]*mx.Array, want []safetensors.Tensor) {
	t.Helper()
	for _, w := range want {
		a, ok := got[w.Name]
		if !ok {
			t.Errorf("tensor %s not loaded", w.Name)
			continue
		}
		st, _ := mx.SafetensorsDType(a.DType())
		if st != w.DType || !slices.Equal(a.Shape(), w.Shape) {
			t.Errorf("tensor %s loaded as %s %v, want %s %v", w.Name, st, a.Shape(), w.DType, w.Shape)
			continue
		}
		if b := mx.Bytes(a); !bytes.Equal(b, w.Data) && len(b)+len(w.Data) > 0 {
			t.Errorf("tensor %s: bytes %x, want %x", w.Name, b, w.Data)
		}
	}
	if len(got) != len(want) {
		t.Errorf("loaded %d tensors, want %d", len(got), len(want))
	}
}

// TestLoadSafetensorsFileDeclines: a file with a dtype MLX does not read (F64), and
// MLXENG_LOAD=go, make the engine decline (errors.ErrUnsupported), and LoadAll then
// reads through Go with the same result; another MLXENG_LOAD value is an error.
func TestLoadSafetensorsFileDeclines(t *testing.T) {
	e := mlxEngine(t)
	ts := stTensors(2)
	f64 := safetensors.Tensor{Name: "f64", DType: safetensors.F64, Shape: []int{2}, Data: bytes.Repeat([]byte{1}, 16)}
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := safetensors.Write(path, append(slices.Clone(ts), f64), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.LoadSafetensorsFile(path, []string{"f32"}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("file with F64: error %v, want one wrapping errors.ErrUnsupported", err)
	}
	ck, err := mx.OpenSafetensors(e, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	got, err := ck.LoadAll(ck.Names())
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, got, append(slices.Clone(ts), f64))

	plain := filepath.Join(t.TempDir(), "plain.safetensors")
	if err := safetensors.Write(plain, ts, nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MLXENG_LOAD", "go")
	if _, err := e.LoadSafetensorsFile(plain, []string{"f32"}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("MLXENG_LOAD=go: error %v, want one wrapping errors.ErrUnsupported", err)
	}
	t.Setenv("MLXENG_LOAD", "fast")
	if _, err := e.LoadSafetensorsFile(plain, []string{"f32"}); err == nil || errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("MLXENG_LOAD=fast: error %v, want a refusal", err)
	}
}
