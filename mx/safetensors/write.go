package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"io"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Tensor is one tensor to write: Data holds prod(Shape) elements of DType,
// little-endian, row-major. An empty Shape is a scalar (one element).
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Write stores tensors and metadata at path as one safetensors file,
// atomically: the bytes go to a temporary file in the same directory, which
// is synced and renamed over path, and the directory is then synced. On any
// error the temporary file is removed and an existing file at path is left
// as it was.
//
// Tensors are laid out in sorted-name order, and the header lists them in
// that order after __metadata__. The reference writer instead orders by
// descending dtype alignment; sorting by name makes the output depend only on
// the set of tensors, not on the order of the slice, so two saves of the same
// state are byte-identical. The header is padded with spaces to a multiple
// of 8 bytes, so the data buffer starts 8-byte aligned in the file.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	plan, err := planFile(path, tensors, metadata)
	if err != nil {
		return err
	}
	return writeAtomic(path, plan.writeTo)
}

// filePlan is a validated file ready to be streamed out.
type filePlan struct {
	header  []byte
	tensors []Tensor // in layout order
}

func planFile(path string, tensors []Tensor, metadata map[string]string) (*filePlan, error) {
	if err := checkMetadata(path, metadata); err != nil {
		return nil, err
	}
	sorted, err := checkTensors(path, tensors)
	if err != nil {
		return nil, err
	}
	sizes := make([]int, len(sorted))
	for i, t := range sorted {
		sizes[i] = len(t.Data)
	}
	header, err := planHeader(path, sorted, sizes, metadata)
	if err != nil {
		return nil, err
	}
	return &filePlan{header: header, tensors: sorted}, nil
}

// planHeader renders the header of sorted tensors laid out in that order with the given
// data sizes: __metadata__ first, padded with spaces to a multiple of 8 bytes.
func planHeader(path string, sorted []Tensor, sizes []int, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		b.WriteString(`"__metadata__":{`)
		for i, k := range slices.Sorted(maps.Keys(metadata)) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			writeJSONString(&b, metadata[k])
		}
		b.WriteByte('}')
	}
	offset := 0
	for i, t := range sorted {
		if i > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, t.Name)
		b.WriteString(`:{"dtype":"`)
		b.WriteString(string(t.DType))
		b.WriteString(`","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, offset, offset+sizes[i])
		offset += sizes[i]
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > maxHeaderSize {
		return nil, formatErr(path, "", ErrHeaderLength, "header length %d exceeds the limit of %d bytes", b.Len(), maxHeaderSize)
	}
	return b.Bytes(), nil
}

func (p *filePlan) writeTo(w io.Writer) error {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(p.header)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(p.header); err != nil {
		return err
	}
	for _, t := range p.tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// checkTensors validates every tensor and returns them sorted by name.
func checkTensors(path string, tensors []Tensor) ([]Tensor, error) {
	sorted := slices.Clone(tensors)
	slices.SortFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	total := 0
	for i, t := range sorted {
		if err := checkTensor(path, t); err != nil {
			return nil, err
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, formatErr(path, t.Name, ErrDuplicate, "given twice")
		}
		if len(t.Data) > math.MaxInt-total {
			return nil, formatErr(path, t.Name, ErrSize, "total data size overflows")
		}
		total += len(t.Data)
	}
	return sorted, nil
}

// checkSpec validates a tensor's name, dtype and shape (not its data) and returns the
// number of data bytes they call for.
func checkSpec(path string, t Tensor) (int, error) {
	switch {
	case t.Name == "":
		return 0, formatErr(path, "", ErrName, "empty tensor name")
	case t.Name == metadataKey:
		return 0, formatErr(path, t.Name, ErrName, "name is reserved for metadata")
	case !utf8.ValidString(t.Name):
		return 0, formatErr(path, t.Name, ErrName, "name is not valid UTF-8")
	case !t.DType.Valid():
		return 0, formatErr(path, t.Name, ErrDType, "unknown dtype %q", t.DType)
	}
	n := uint64(1)
	overflow := false
	for _, d := range t.Shape {
		if d < 0 {
			return 0, formatErr(path, t.Name, ErrShape, "shape %v has a negative dimension", t.Shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		overflow = overflow || hi != 0
		n = lo
	}
	hi, want := bits.Mul64(n, uint64(t.DType.Size()))
	if overflow || hi != 0 || want > math.MaxInt {
		return 0, formatErr(path, t.Name, ErrShape, "shape %v of %s overflows", t.Shape, t.DType)
	}
	return int(want), nil
}

func checkTensor(path string, t Tensor) error {
	want, err := checkSpec(path, t)
	if err != nil {
		return err
	}
	if len(t.Data) != want {
		return formatErr(path, t.Name, ErrSize, "shape %v of %s needs %d bytes, got %d", t.Shape, t.DType, want, len(t.Data))
	}
	return nil
}

func checkMetadata(path string, metadata map[string]string) error {
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return formatErr(path, "", ErrMetadata, "entry %q is not valid UTF-8", k)
		}
	}
	return nil
}

// writeJSONString writes s as a JSON string without HTML escaping, so names
// like "a<b" are stored as written (json.Marshal would emit \u003c).
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode appends a newline
}

// writeAtomic publishes the file atomically (see internal/atomicfile).
func writeAtomic(path string, write func(io.Writer) error) error {
	if err := atomicfile.Write(path, write); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	return nil
}
