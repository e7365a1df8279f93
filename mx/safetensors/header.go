package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// maxHeaderSize caps the JSON header as the reference implementation does,
// so a hostile length cannot make us parse gigabytes of JSON.
const maxHeaderSize = 100_000_000

const metadataKey = "__metadata__"

// header is a parsed and fully validated safetensors header.
type header struct {
	tensors  map[string]TensorInfo
	names    []string // sorted
	metadata map[string]string
	dataPos  int // where the data buffer starts in the file: 8 + N
}

// parseHeader validates buf, the whole file, and returns its header. Every
// number taken from the file is checked against len(buf) before it is used
// for slicing, and nothing is allocated from such a number: allocations are
// bounded by the header's own byte length.
func parseHeader(file string, buf []byte) (*header, error) {
	if len(buf) < 8 {
		return nil, formatErr(file, "", ErrShortFile, "file is %d bytes, shorter than the 8-byte header length", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > maxHeaderSize {
		return nil, formatErr(file, "", ErrHeaderLength, "header length %d exceeds the limit of %d bytes", n, maxHeaderSize)
	}
	if n > uint64(len(buf)-8) {
		return nil, formatErr(file, "", ErrHeaderLength, "header length %d exceeds file size %d", n, len(buf))
	}
	raw := buf[8 : 8+n]
	dataLen := len(buf) - 8 - int(n)

	entries, err := splitObject(raw)
	if err != nil {
		return nil, formatErr(file, "", ErrHeader, "%v", err)
	}
	h := &header{tensors: make(map[string]TensorInfo, len(entries)), dataPos: 8 + int(n)}
	for _, e := range entries {
		if e.key == metadataKey {
			if h.metadata != nil {
				return nil, formatErr(file, "", ErrDuplicate, "%s appears twice", metadataKey)
			}
			if h.metadata, err = parseMetadata(e.value); err != nil {
				return nil, formatErr(file, "", ErrMetadata, "%s: %v", metadataKey, err)
			}
			continue
		}
		if _, dup := h.tensors[e.key]; dup {
			return nil, formatErr(file, e.key, ErrDuplicate, "appears twice in the header")
		}
		info, err := parseTensorInfo(e.value, dataLen)
		if err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				fe.File, fe.Tensor = file, e.key
			}
			return nil, err
		}
		h.tensors[e.key] = info
		h.names = append(h.names, e.key)
	}
	if h.metadata == nil {
		h.metadata = map[string]string{}
	}
	slices.Sort(h.names)
	if err := checkTiling(file, h, dataLen); err != nil {
		return nil, err
	}
	return h, nil
}

type entry struct {
	key   string
	value json.RawMessage
}

// splitObject returns the members of the JSON object raw in order, keeping
// duplicates so the caller can reject them (encoding/json alone would keep
// the last silently).
func splitObject(raw []byte) ([]entry, error) {
	if !utf8.Valid(raw) {
		// encoding/json would quietly replace bad bytes with U+FFFD and so
		// rename a tensor.
		return nil, errors.New("header is not valid UTF-8")
	}
	var probe json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("header is not valid JSON: %v (at byte %d)", se, se.Offset)
		}
		return nil, fmt.Errorf("header is not valid JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("header is not a JSON object")
	}
	var out []entry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header: %v", err)
		}
		key, _ := tok.(string) // object keys are always strings in valid JSON
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("header: value of %q: %v", key, err)
		}
		out = append(out, entry{key, v})
	}
	return out, nil
}

func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	if string(raw) == "null" {
		// The reference implementation treats a null __metadata__ as absent.
		return map[string]string{}, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	m := map[string]string{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// tensorJSON is one header entry as it appears on disk. Numbers stay raw so
// that negative, fractional, quoted and oversized values can be told apart
// and reported precisely; unknown members are ignored, as the reference
// implementation does.
type tensorJSON struct {
	DType   *string            `json:"dtype"`
	Shape   *[]json.RawMessage `json:"shape"`
	Offsets *[]json.RawMessage `json:"data_offsets"`
}

// parseTensorInfo validates one entry on its own; the tiling of the buffer is
// checked afterwards across all entries. The returned *FormatError lacks the
// file and tensor names, which the caller fills in.
func parseTensorInfo(raw json.RawMessage, dataLen int) (TensorInfo, error) {
	bad := func(sentinel error, format string, args ...any) (TensorInfo, error) {
		return TensorInfo{}, &FormatError{Err: sentinel, Detail: fmt.Sprintf(format, args...)}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return bad(ErrHeader, "entry is %s, not a JSON object", clip(raw))
	}
	var tj tensorJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		return bad(ErrHeader, "%v", err)
	}
	if tj.DType == nil {
		return bad(ErrHeader, "missing dtype")
	}
	if tj.Shape == nil {
		return bad(ErrHeader, "missing shape")
	}
	if tj.Offsets == nil {
		return bad(ErrHeader, "missing data_offsets")
	}
	dt := DType(*tj.DType)
	if !dt.Valid() {
		return bad(ErrDType, "unknown dtype %q", *tj.DType)
	}

	shape := make([]int, len(*tj.Shape))
	nelem := uint64(1)
	overflow := false
	for i, r := range *tj.Shape {
		d, err := parseCount(r)
		if err != nil {
			return bad(ErrShape, "shape[%d] = %s: %v", i, clip(r), err)
		}
		shape[i] = int(d)
		hi, lo := bits.Mul64(nelem, d)
		overflow = overflow || hi != 0
		nelem = lo
	}
	hi, nbytes := bits.Mul64(nelem, uint64(dt.Size()))
	if overflow || hi != 0 || nbytes > math.MaxInt {
		return bad(ErrShape, "shape %v of %s overflows", shape, dt)
	}

	if len(*tj.Offsets) != 2 {
		return bad(ErrOffsets, "data_offsets has %d entries, want 2", len(*tj.Offsets))
	}
	var off [2]uint64
	for i, r := range *tj.Offsets {
		v, err := parseCount(r)
		if err != nil {
			return bad(ErrOffsets, "data_offsets[%d] = %s: %v", i, clip(r), err)
		}
		off[i] = v
	}
	if off[0] > off[1] {
		return bad(ErrOffsets, "data_offsets [%d %d] begin after end", off[0], off[1])
	}
	if off[1] > uint64(dataLen) {
		return bad(ErrOffsets, "data_offsets [%d %d] out of range (buffer %d bytes)", off[0], off[1], dataLen)
	}
	if got := off[1] - off[0]; got != nbytes {
		return bad(ErrSize, "shape %v of %s needs %d bytes, data_offsets [%d %d] hold %d", shape, dt, nbytes, off[0], off[1], got)
	}
	return TensorInfo{DType: dt, Shape: shape, Offsets: [2]int{int(off[0]), int(off[1])}}, nil
}

// parseCount reads a JSON number that must be a non-negative integer that
// fits in an int.
func parseCount(r json.RawMessage) (uint64, error) {
	s := string(r)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, errors.New("not a number")
	}
	if s[0] == '-' {
		return 0, errors.New("negative")
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) || (err == nil && v > math.MaxInt) {
		return 0, errors.New("too large")
	}
	if err != nil {
		return 0, errors.New("not an integer")
	}
	return v, nil
}

// checkTiling verifies that the tensors, ordered by offset, tile the buffer
// exactly: each starts where the previous ended and the last ends at the end
// of the file. This is the reference implementation's rule; it rules out
// overlapping (aliased) tensors and hidden bytes.
func checkTiling(file string, h *header, dataLen int) error {
	order := slices.Clone(h.names)
	slices.SortFunc(order, func(a, b string) int {
		ia, ib := h.tensors[a], h.tensors[b]
		return cmp.Or(cmp.Compare(ia.Offsets[0], ib.Offsets[0]), cmp.Compare(ia.Offsets[1], ib.Offsets[1]), cmp.Compare(a, b))
	})
	end, prev := 0, ""
	for _, name := range order {
		o := h.tensors[name].Offsets
		switch {
		case o[0] < end:
			return formatErr(file, name, ErrOverlap, "data_offsets [%d %d] overlap tensor %q, which ends at %d", o[0], o[1], prev, end)
		case o[0] > end:
			return formatErr(file, name, ErrCoverage, "data_offsets [%d %d] leave bytes [%d %d) of the buffer unused", o[0], o[1], end, o[0])
		}
		end, prev = o[1], name
	}
	if end != dataLen {
		return formatErr(file, "", ErrCoverage, "tensors end at byte %d of a %d-byte data buffer", end, dataLen)
	}
	return nil
}

// clip shortens a raw JSON value for an error message.
func clip(r json.RawMessage) string {
	const max = 40
	if len(r) <= max {
		return string(r)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(r[cut]) {
		cut--
	}
	return string(r[:cut]) + "..."
}
