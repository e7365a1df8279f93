package goeng

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/safetensors"
)

// TestFromMapped: aligned float32/uint32/int32/half bytes are used in place (a change to
// the bytes shows in the tensor), misaligned ones and other dtypes are refused, so the
// caller copies.
func TestFromMapped(t *testing.T) {
	e := New()
	buf := make([]byte, 4*6+4)
	for i := range 6 {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(i)+0.5))
	}
	h, ok := e.FromMapped(buf[:24], []int{2, 3}, mx.Float32)
	if !ok {
		t.Fatal("aligned float32 bytes not used in place")
	}
	x := tt(h)
	if !slices.Equal(x.f32(), []float32{0.5, 1.5, 2.5, 3.5, 4.5, 5.5}) {
		t.Fatalf("values %v", x.f32())
	}
	binary.LittleEndian.PutUint32(buf[4:], math.Float32bits(-7))
	if x.f32()[1] != -7 {
		t.Fatal("the tensor does not alias the bytes")
	}
	for _, dt := range []mx.DType{mx.Uint32, mx.Int32} {
		if _, ok := e.FromMapped(buf[:24], []int{6}, dt); !ok {
			t.Errorf("%s refused", dt)
		}
	}
	if _, ok := e.FromMapped(buf[:12], []int{6}, mx.BFloat16); !ok {
		t.Error("bfloat16 refused")
	}
	if _, ok := e.FromMapped(buf[1:25], []int{6}, mx.Float32); ok {
		t.Error("misaligned float32 used in place")
	}
	if _, ok := e.FromMapped(buf[:24], []int{3}, mx.Float64); ok {
		t.Error("float64 used in place")
	}
	if _, ok := e.FromMapped(buf[:20], []int{6}, mx.Float32); ok {
		t.Error("short bytes used in place")
	}
}

// TestLoadMapped: arrays loaded in place equal Load's copies and stay valid after the
// checkpoint is closed; a tensor at an offset misaligned for its dtype is copied.
func TestLoadMapped(t *testing.T) {
	e := New()
	path := filepath.Join(t.TempDir(), "m.safetensors")
	f32 := make([]byte, 4*5)
	for i := range 5 {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(i)*1.25))
	}
	// Sorted layout: "a" (3 bf16 = 6 bytes) first, so "b" (f32) starts at offset 6.
	err := safetensors.Write(path, []safetensors.Tensor{
		{Name: "a", DType: safetensors.BF16, Shape: []int{3}, Data: []byte{0x80, 0x3f, 0, 0x40, 0x40, 0x40}},
		{Name: "b", DType: safetensors.F32, Shape: []int{5}, Data: f32},
		{Name: "c", DType: safetensors.U32, Shape: []int{2}, Data: []byte{1, 0, 0, 0, 2, 0, 0, 0}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := mx.OpenSafetensors(e, path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mx.Array{}
	want := map[string]any{}
	for _, n := range ck.Names() {
		a, err := ck.LoadMapped(n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ck.Load(n)
		if err != nil {
			t.Fatal(err)
		}
		got[n], want[n] = a, b.Handle().(*tensor).raw()
	}
	if err := ck.Close(); err != nil {
		t.Fatal(err)
	}
	for n, a := range got {
		if !equalData(tt(a.Handle()).raw(), want[n]) {
			t.Errorf("%s: in-place %v, copy %v", n, tt(a.Handle()).raw(), want[n])
		}
	}
}

func equalData(a, b any) bool {
	switch x := a.(type) {
	case []float32:
		return slices.Equal(x, b.([]float32))
	case []uint16:
		return slices.Equal(x, b.([]uint16))
	case []uint32:
		return slices.Equal(x, b.([]uint32))
	}
	return false
}
