package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// rawFile assembles a safetensors file by hand: the 8-byte little-endian
// length of header, header, then data.
func rawFile(header string, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	return slices.Concat(n[:], []byte(header), data)
}

// withLength is rawFile with an explicit (possibly lying) header length.
func withLength(n uint64, rest string) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	return append(b[:], rest...)
}

func writeTemp(t testing.TB, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenReferenceExample opens the example file from the reference
// implementation's documentation: a 60-byte ('<') header describing an I32
// [2,2] tensor over 16 zero bytes.
func TestOpenReferenceExample(t *testing.T) {
	content := []byte("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}" + strings.Repeat("\x00", 16))
	f, err := Open(writeTemp(t, "ref.safetensors", content))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, ok := f.Info("test")
	if !ok || info.DType != I32 || !slices.Equal(info.Shape, []int{2, 2}) || info.Offsets != [2]int{0, 16} {
		t.Fatalf("Info(test) = %+v, %v", info, ok)
	}
	if info.Size() != 16 || info.NumElements() != 4 {
		t.Errorf("Size, NumElements = %d, %d, want 16, 4", info.Size(), info.NumElements())
	}
	d, err := f.Data("test")
	if err != nil || !bytes.Equal(d, make([]byte, 16)) {
		t.Errorf("Data(test) = %v, %v", d, err)
	}
	if m := f.Metadata(); m == nil || len(m) != 0 {
		t.Errorf("Metadata() = %#v, want empty non-nil map", m)
	}
}

func TestOpenBad(t *testing.T) {
	u8x8 := make([]byte, 8)
	tests := []struct {
		name    string
		content []byte
		want    error
		msg     string // substring of the message
	}{
		{"empty file", nil, ErrShortFile, "file is 0 bytes"},
		{"five bytes", []byte{1, 2, 3, 4, 5}, ErrShortFile, "file is 5 bytes"},
		// 8 + 12 bytes on disk, but the header claims 1000.
		{"header beyond file", withLength(1000, "{}          "), ErrHeaderLength, "header length 1000 exceeds file size 20"},
		{"header length huge", withLength(1<<63, "{}"), ErrHeaderLength, "exceeds the limit"},
		{"header length all ones", withLength(^uint64(0), "{}"), ErrHeaderLength, "exceeds the limit"},
		{"not JSON", rawFile(`{"a":`, nil), ErrHeader, "not valid JSON"},
		{"not UTF-8", rawFile("{\"\xff\":{}}", nil), ErrHeader, "UTF-8"},
		{"JSON array", rawFile(`[]`, nil), ErrHeader, "not a JSON object"},
		{"trailing garbage", rawFile(`{} x`, nil), ErrHeader, "not valid JSON"},
		{"entry not an object", rawFile(`{"x":3}`, nil), ErrHeader, `tensor "x": entry is 3`},
		{"missing dtype", rawFile(`{"x":{"shape":[],"data_offsets":[0,0]}}`, nil), ErrHeader, "missing dtype"},
		{"missing shape", rawFile(`{"x":{"dtype":"U8","data_offsets":[0,0]}}`, nil), ErrHeader, "missing shape"},
		{"missing offsets", rawFile(`{"x":{"dtype":"U8","shape":[0]}}`, nil), ErrHeader, "missing data_offsets"},
		{"dtype wrong type", rawFile(`{"x":{"dtype":4,"shape":[],"data_offsets":[0,1]}}`, []byte{0}), ErrHeader, "dtype"},
		{"unknown dtype", rawFile(`{"x":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), ErrDType, `unknown dtype "F8_E4M3"`},
		{"lowercase dtype", rawFile(`{"x":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrDType, `"f32"`},
		{"negative dim", rawFile(`{"x":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, nil), ErrShape, "shape[0] = -1: negative"},
		{"fractional dim", rawFile(`{"x":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}`, []byte{0}), ErrShape, "not an integer"},
		{"quoted dim", rawFile(`{"x":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}}`, []byte{0}), ErrShape, "not a number"},
		{"huge dim", rawFile(`{"x":{"dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,1]}}`, []byte{0}), ErrShape, "too large"},
		// 2^32 * 2^32 = 2^64 elements overflows uint64.
		{"product overflow", rawFile(`{"x":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}}`, []byte{0}), ErrShape, "overflows"},
		// 2^62 elements fit, but 2^62 * 4 bytes = 2^64 does not.
		{"byte size overflow", rawFile(`{"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,1]}}`, []byte{0}), ErrShape, "overflows"},
		{"one offset", rawFile(`{"x":{"dtype":"U8","shape":[0],"data_offsets":[0]}}`, nil), ErrOffsets, "has 1 entries, want 2"},
		{"negative offset", rawFile(`{"x":{"dtype":"U8","shape":[0],"data_offsets":[-1,-1]}}`, nil), ErrOffsets, "negative"},
		{"begin after end", rawFile(`{"x":{"dtype":"U8","shape":[4],"data_offsets":[4,0]}}`, make([]byte, 4)), ErrOffsets, "[4 0] begin after end"},
		{"out of range", rawFile(`{"x":{"dtype":"U8","shape":[10],"data_offsets":[0,10]}}`, u8x8), ErrOffsets, "[0 10] out of range (buffer 8 bytes)"},
		// F32 [3] needs 3*4 = 12 bytes; the offsets give 8.
		{"size mismatch", rawFile(`{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, u8x8), ErrSize, "shape [3] of F32 needs 12 bytes, data_offsets [0 8] hold 8"},
		// A scalar is one element: BF16 [] needs 2 bytes.
		{"scalar size mismatch", rawFile(`{"x":{"dtype":"BF16","shape":[],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrSize, "needs 2 bytes"},
		{"overlap", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12)), ErrOverlap, `tensor "b": data_offsets [4 12] overlap tensor "a", which ends at 8`},
		{"empty tensor inside another", rawFile(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}}`, u8x8), ErrOverlap, `tensor "b"`},
		{"same range twice", rawFile(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, u8x8), ErrOverlap, `tensor "b"`},
		{"gap", rawFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}}`, make([]byte, 10)), ErrCoverage, "leave bytes [4 6) of the buffer unused"},
		{"leading gap", rawFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}`, u8x8), ErrCoverage, "[0 4)"},
		{"trailing bytes", rawFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, make([]byte, 6)), ErrCoverage, "tensors end at byte 4 of a 6-byte data buffer"},
		{"no tensors but data", rawFile(`{}`, []byte{1, 2}), ErrCoverage, "end at byte 0 of a 2-byte"},
		{"duplicate tensor", rawFile(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, nil), ErrDuplicate, `tensor "a"`},
		{"duplicate metadata", rawFile(`{"__metadata__":{},"__metadata__":{}}`, nil), ErrDuplicate, "__metadata__ appears twice"},
		{"metadata number value", rawFile(`{"__metadata__":{"n":3}}`, nil), ErrMetadata, "__metadata__"},
		{"metadata array", rawFile(`{"__metadata__":["a"]}`, nil), ErrMetadata, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemp(t, "bad.safetensors", tt.content)
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatalf("Open succeeded, want %v", tt.want)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open error = %v, want errors.Is %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open error = %q, want it to name %s and contain %q", err, path, tt.msg)
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != path {
				t.Errorf("Open error %v is not a *FormatError for %s", err, path)
			}
		})
	}
}

// TestErrorMessage pins the whole message of a typical error, as users see it.
func TestErrorMessage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	content := rawFile(`{"x":{"dtype":"U8","shape":[10],"data_offsets":[0,10]}}`, make([]byte, 8))
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	want := `safetensors: ` + path + `: tensor "x": data_offsets [0 10] out of range (buffer 8 bytes)`
	if err == nil || err.Error() != want {
		t.Errorf("Open error = %v, want %s", err, want)
	}
}

func TestOpenNotAFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.safetensors")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) error = %v, want fs.ErrNotExist", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Open(dir) error = %v, want not a regular file", err)
	}
}

// TestAcceptsWhatTheReferenceAccepts covers header forms that other writers
// produce: tensors listed out of offset order, unknown members, a null
// __metadata__, and padding after the JSON.
func TestAcceptsWhatTheReferenceAccepts(t *testing.T) {
	header := `{"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4],"extra":true},` +
		`"a":{"dtype":"U16","shape":[1],"data_offsets":[0,2]},"__metadata__":null}    `
	f, err := Open(writeTemp(t, "ok.safetensors", rawFile(header, []byte{1, 2, 3, 4})))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Names() = %q", got)
	}
	if d, _ := f.Data("b"); !bytes.Equal(d, []byte{3, 4}) {
		t.Errorf("Data(b) = %v, want [3 4]", d)
	}
}

func TestDataLifecycle(t *testing.T) {
	content := rawFile(`{"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, []byte{1, 2, 3, 4})
	path := writeTemp(t, "x.safetensors", content)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Data("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Data(nope) error = %v, want ErrNotFound", err)
	}
	d, err := f.Data("x")
	if err != nil {
		t.Fatal(err)
	}
	if cap(d) != 4 {
		t.Errorf("cap(Data) = %d, want 4 (appending must not reach past the tensor)", cap(d))
	}
	// The mapping is private: writing into the view must not reach the file.
	d[0] = 99
	info, _ := f.Info("x")
	info.Shape[0] = 7
	if again, _ := f.Info("x"); again.Shape[0] != 4 {
		t.Errorf("Info shape changed through a returned copy: %v", again.Shape)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
		t.Errorf("file changed after writing into a Data view")
	}
	if _, err := f.Data("x"); !errors.Is(err, ErrClosed) {
		t.Errorf("Data after Close error = %v, want ErrClosed", err)
	}
	if err := f.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close error = %v, want ErrClosed", err)
	}
}

// FuzzOpen feeds arbitrary bytes to Open. It must never panic; a failure on
// a regular file must be a *FormatError; a success must serve every tensor
// with exactly prod(shape) * element size bytes.
func FuzzOpen(f *testing.F) {
	f.Add(rawFile(`{"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, []byte{1, 2, 3, 4}))
	f.Add(rawFile(`{"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[0,3],"data_offsets":[4,4]}}`, make([]byte, 4)))
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12)))
	f.Add(withLength(1000, "{}"))
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(dir, "fuzz.safetensors")
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := Open(path)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Open error %v is not a *FormatError", err)
			}
			return
		}
		defer file.Close()
		for _, name := range file.Names() {
			info, ok := file.Info(name)
			if !ok {
				t.Fatalf("Info(%q) missing for a listed name", name)
			}
			d, err := file.Data(name)
			if err != nil {
				t.Fatal(err)
			}
			if len(d) != info.NumElements()*info.DType.Size() {
				t.Fatalf("tensor %q: %d bytes for shape %v of %s", name, len(d), info.Shape, info.DType)
			}
		}
	})
}

// TestLongValueInMessage: a long bad value is shortened in the message
// without splitting a multi-byte character.
func TestLongValueInMessage(t *testing.T) {
	header := `{"x":"` + strings.Repeat("é", 40) + `"}`
	_, err := Open(writeTemp(t, "long.safetensors", rawFile(header, nil)))
	if !errors.Is(err, ErrHeader) {
		t.Fatalf("Open error = %v, want ErrHeader", err)
	}
	msg := err.Error()
	if !strings.HasSuffix(msg, `..., not a JSON object`) || !utf8.ValidString(msg) || strings.Count(msg, "é") >= 40 {
		t.Errorf("message %q is not a clipped, valid UTF-8 rendering", msg)
	}
}

// TestKeep: after Keep, Close leaves the mapping in place, so bytes returned by Data
// stay readable; without Keep they are gone (Data refuses after Close).
func TestKeep(t *testing.T) {
	data := []byte{1, 0, 0, 0, 2, 0, 0, 0}
	p := writeTemp(t, "k.safetensors", rawFile(`{"x":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}`, data))
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Data("x")
	if err != nil {
		t.Fatal(err)
	}
	f.Keep()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, data) {
		t.Fatalf("kept bytes %v, want %v", b, data)
	}
	if _, err := f.Data("x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Data after Close: %v, want ErrClosed", err)
	}
}
