package safetensors

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPlannedEqualsWrite fills a planned file piece by piece, out of order, and checks it
// is byte-identical to Write of the same tensors, and that ReadAt returns each piece.
func TestPlannedEqualsWrite(t *testing.T) {
	dir := t.TempDir()
	tensors := []Tensor{
		{Name: "b.weight", DType: U32, Shape: []int{3, 2}, Data: pattern(24, 1)},
		{Name: "a.scales", DType: BF16, Shape: []int{5}, Data: pattern(10, 50)},
		{Name: "c", DType: F32, Shape: nil, Data: pattern(4, 90)},
	}
	meta := map[string]string{"format": "mlx"}
	want := filepath.Join(dir, "want.safetensors")
	if err := Write(want, tensors, meta); err != nil {
		t.Fatal(err)
	}
	specs := make([]Tensor, len(tensors))
	for i, tn := range tensors {
		specs[i] = Tensor{Name: tn.Name, DType: tn.DType, Shape: tn.Shape}
	}
	got := filepath.Join(dir, "got.safetensors")
	p, err := CreatePlanned(got, specs, meta)
	if err != nil {
		t.Fatal(err)
	}
	// Last tensor first, the first one in two halves, second half first.
	for _, w := range []struct {
		i, lo, hi int
	}{{2, 0, 4}, {0, 12, 24}, {1, 0, 10}, {0, 0, 12}} {
		tn := tensors[w.i]
		if err := p.WriteAt(tn.Name, tn.Data[w.lo:w.hi], int64(w.lo)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(want)
	b, _ := os.ReadFile(got)
	if !bytes.Equal(a, b) {
		t.Fatalf("planned file differs from Write's:\n got %q\nwant %q", b, a)
	}
	f, err := Open(got)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	part := make([]byte, 8)
	if err := f.ReadAt("b.weight", part, 10); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(part, tensors[0].Data[10:18]) {
		t.Errorf("ReadAt(b.weight, 8 bytes at 10) = %v, want %v", part, tensors[0].Data[10:18])
	}
	if err := f.ReadAt("b.weight", part, 20); !errors.Is(err, ErrOffsets) {
		t.Errorf("ReadAt past the end: err = %v, want ErrOffsets", err)
	}
	if err := f.ReadAt("nope", part, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadAt(nope): err = %v, want ErrNotFound", err)
	}
}

// TestPlannedRefusals: bad writes and an incomplete file are errors; Abort removes it.
func TestPlannedRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.safetensors")
	if _, err := CreatePlanned(path, []Tensor{{Name: "a", DType: F32, Shape: []int{1}, Data: []byte{0, 0, 0, 0}}}, nil); err == nil {
		t.Error("CreatePlanned with data: no error")
	}
	if _, err := CreatePlanned(path, []Tensor{{Name: "a", DType: F32, Shape: []int{1}}, {Name: "a", DType: F32, Shape: []int{1}}}, nil); !errors.Is(err, ErrDuplicate) {
		t.Errorf("CreatePlanned with a duplicate: err = %v, want ErrDuplicate", err)
	}
	p, err := CreatePlanned(path, []Tensor{{Name: "a", DType: F32, Shape: []int{2}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WriteAt("a", make([]byte, 8), 4); !errors.Is(err, ErrOffsets) {
		t.Errorf("WriteAt past the end: err = %v, want ErrOffsets", err)
	}
	if err := p.WriteAt("b", make([]byte, 4), 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("WriteAt(b): err = %v, want ErrNotFound", err)
	}
	if err := p.WriteAt("a", make([]byte, 4), 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); !errors.Is(err, ErrSize) || err.Error() != `safetensors: `+path+`: tensor "a": 4 of its 8 bytes were written` {
		t.Errorf("Close of a half-written file: err = %v", err)
	}
	p.Abort()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("after Abort: stat err = %v, want not exist", err)
	}
}
