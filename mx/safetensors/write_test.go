package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pattern returns n bytes 1, 2, 3, ... so misplaced data is visible.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestRoundTripEveryDType writes, for every dtype, a [2,3] tensor (6
// elements × size bytes), an empty [0,4] tensor and a scalar (1 element),
// and reads them back byte for byte.
func TestRoundTripEveryDType(t *testing.T) {
	dtypes := []DType{F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL}
	sizes := map[DType]int{F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U64: 8, U32: 4, U16: 2, U8: 1, BOOL: 1}
	var tensors []Tensor
	for i, dt := range dtypes {
		if dt.Size() != sizes[dt] {
			t.Errorf("%s.Size() = %d, want %d", dt, dt.Size(), sizes[dt])
		}
		sz := sizes[dt]
		tensors = append(tensors,
			Tensor{Name: string(dt) + ".matrix", DType: dt, Shape: []int{2, 3}, Data: pattern(6*sz, byte(i*16))},
			Tensor{Name: string(dt) + ".empty", DType: dt, Shape: []int{0, 4}, Data: nil},
			Tensor{Name: string(dt) + ".scalar", DType: dt, Shape: []int{}, Data: pattern(sz, byte(200+i))},
		)
	}
	path := filepath.Join(t.TempDir(), "all.safetensors")
	if err := Write(path, tensors, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	for _, tt := range tensors {
		want = append(want, tt.Name)
	}
	slices.Sort(want)
	if got := f.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	for _, tt := range tensors {
		info, ok := f.Info(tt.Name)
		if !ok || info.DType != tt.DType || !slices.Equal(info.Shape, tt.Shape) {
			t.Errorf("Info(%q) = %+v, %v; want %s %v", tt.Name, info, ok, tt.DType, tt.Shape)
		}
		d, err := f.Data(tt.Name)
		if err != nil || !bytes.Equal(d, tt.Data) || len(d) != len(tt.Data) {
			t.Errorf("Data(%q) = %v, %v; want %v", tt.Name, d, err, tt.Data)
		}
	}
}

// TestWriteBytes pins the exact bytes Write produces for a small case, so
// the layout (metadata first, tensors in name order, contiguous data,
// space padding to a multiple of 8) is fixed by the test rather than by the
// implementation.
func TestWriteBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	tensors := []Tensor{
		{Name: "b", DType: F32, Shape: []int{1}, Data: []byte{0, 0, 0x80, 0x3f}}, // 1.0f
		{Name: "a<&>", DType: U8, Shape: []int{2}, Data: []byte{7, 9}},
	}
	if err := Write(path, tensors, map[string]string{"format": "mlx"}); err != nil {
		t.Fatal(err)
	}
	// "a<&>" sorts before "b", so it takes bytes [0,2) and b [2,6). HTML
	// characters are stored as written.
	header := `{"__metadata__":{"format":"mlx"},` +
		`"a<&>":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},` +
		`"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}`
	// That JSON is 33 + 55 + 53 = 141 bytes (the three lines above);
	// padding to 144 adds 3 spaces.
	if len(header) != 141 {
		t.Fatalf("hand-written header is %d bytes, comment says 141", len(header))
	}
	want := slices.Concat([]byte{144, 0, 0, 0, 0, 0, 0, 0}, []byte(header+"   "), []byte{7, 9, 0, 0, 0x80, 0x3f})
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("file bytes:\n%q\nwant\n%q", got, want)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", st.Mode().Perm())
	}
}

func TestHeaderPadding(t *testing.T) {
	// Names of length 1..8 move the JSON length through every residue mod 8.
	for n := 1; n <= 8; n++ {
		path := filepath.Join(t.TempDir(), "p.safetensors")
		name := strings.Repeat("n", n)
		if err := Write(path, []Tensor{{Name: name, DType: U8, Shape: []int{1}, Data: []byte{5}}}, nil); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		hlen := binary.LittleEndian.Uint64(got)
		if hlen%8 != 0 || uint64(len(got)) != 8+hlen+1 || got[8+hlen] != 5 {
			t.Errorf("name %q: header length %d, file %d bytes", name, hlen, len(got))
		}
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	meta := map[string]string{"format": "mlx", "ünïcode": "値 <&> \"quoted\"\n", "empty": ""}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Write(path, []Tensor{{Name: "x", DType: I8, Shape: []int{1}, Data: []byte{0xff}}}, meta); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Metadata(); !maps.Equal(got, meta) {
		t.Errorf("Metadata() = %q, want %q", got, meta)
	}
	got := f.Metadata()
	got["format"] = "changed"
	if f.Metadata()["format"] != "mlx" {
		t.Error("Metadata() returned the file's own map")
	}
}

// TestWriteNoTensors: a file with no tensors and no metadata is the header
// "{}" padded to 8 bytes, and reads back empty.
func TestWriteNoTensors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.safetensors")
	if err := Write(path, nil, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := slices.Concat([]byte{8, 0, 0, 0, 0, 0, 0, 0}, []byte("{}      "))
	if !bytes.Equal(got, want) {
		t.Errorf("file = %q, want %q", got, want)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Names()) != 0 {
		t.Errorf("Names() = %q", f.Names())
	}
}

func TestWriteBad(t *testing.T) {
	ok := Tensor{Name: "ok", DType: U8, Shape: []int{1}, Data: []byte{1}}
	tests := []struct {
		name    string
		tensors []Tensor
		meta    map[string]string
		want    error
		msg     string
	}{
		// F32 [2,2] needs 2*2*4 = 16 bytes.
		{"short data", []Tensor{{Name: "w", DType: F32, Shape: []int{2, 2}, Data: make([]byte, 15)}}, nil, ErrSize, "shape [2 2] of F32 needs 16 bytes, got 15"},
		{"scalar with two elements", []Tensor{{Name: "s", DType: U16, Data: make([]byte, 4)}}, nil, ErrSize, "needs 2 bytes"},
		{"unknown dtype", []Tensor{{Name: "w", DType: "F8_E5M2", Shape: []int{1}, Data: []byte{0}}}, nil, ErrDType, `"F8_E5M2"`},
		{"negative dim", []Tensor{{Name: "w", DType: U8, Shape: []int{-1}}}, nil, ErrShape, "negative"},
		{"overflowing shape", []Tensor{{Name: "w", DType: U8, Shape: []int{1 << 62, 1 << 62}}}, nil, ErrShape, "overflows"},
		{"duplicate", []Tensor{ok, ok}, nil, ErrDuplicate, `tensor "ok"`},
		{"empty name", []Tensor{{DType: U8, Shape: []int{0}}}, nil, ErrName, "empty"},
		{"reserved name", []Tensor{{Name: "__metadata__", DType: U8, Shape: []int{0}}}, nil, ErrName, "reserved"},
		{"bad UTF-8 name", []Tensor{{Name: "\xff", DType: U8, Shape: []int{0}}}, nil, ErrName, "UTF-8"},
		{"bad UTF-8 metadata", []Tensor{ok}, map[string]string{"k": "\xfe"}, ErrMetadata, "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "target.safetensors")
			old := []byte("previous contents")
			if err := os.WriteFile(path, old, 0o644); err != nil {
				t.Fatal(err)
			}
			err := Write(path, tt.tensors, tt.meta)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Write error = %v, want %v containing %q", err, tt.want, tt.msg)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
				t.Errorf("target changed to %q", got)
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{"target.safetensors"}) {
				t.Errorf("directory holds %q, want only the target", names)
			}
		})
	}
}

// TestWriteFailureMidway makes the write itself fail after some bytes have
// reached the temporary file: the temporary file must be gone and the
// existing target untouched.
func TestWriteFailureMidway(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "target.safetensors")
	old := []byte("previous contents")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	diskFull := errors.New("no space left on device")
	err := writeAtomic(path, func(w io.Writer) error {
		// More than the 1 MiB buffer, so bytes really reach the file.
		if _, err := w.Write(make([]byte, 3<<20)); err != nil {
			return err
		}
		return diskFull
	})
	if !errors.Is(err, diskFull) || !strings.Contains(err.Error(), path) {
		t.Fatalf("writeAtomic error = %v, want the writer's error naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
		t.Errorf("target changed to %d bytes", len(got))
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"target.safetensors"}) {
		t.Errorf("directory holds %q, want only the target", names)
	}
}

// TestWriteRenameFails points Write at a path that is a non-empty
// directory, so everything succeeds up to the rename, which fails.
func TestWriteRenameFails(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.safetensors")
	if err := os.MkdirAll(filepath.Join(target, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Write(target, []Tensor{{Name: "x", DType: U8, Shape: []int{1}, Data: []byte{1}}}, nil)
	if err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"target.safetensors"}) {
		t.Errorf("directory holds %q, want only the target", names)
	}
	if _, err := os.Stat(filepath.Join(target, "keep")); err != nil {
		t.Errorf("target directory damaged: %v", err)
	}
}

func TestWriteMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "x.safetensors")
	if err := Write(path, nil, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Write into a missing directory error = %v, want one naming %s", err, path)
	}
}

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "target.safetensors")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []Tensor{{Name: "x", DType: U8, Shape: []int{1}, Data: []byte{42}}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if d, _ := f.Data("x"); !bytes.Equal(d, []byte{42}) {
		t.Errorf("Data(x) = %v", d)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"target.safetensors"}) {
		t.Errorf("directory holds %q", names)
	}
}
