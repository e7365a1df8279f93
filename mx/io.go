package mx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/dgtune/dgtune/mx/safetensors"
)

var toST = map[DType]safetensors.DType{
	Float32: safetensors.F32, Float16: safetensors.F16, BFloat16: safetensors.BF16, Float64: safetensors.F64,
	Int32: safetensors.I32, Int64: safetensors.I64, Uint32: safetensors.U32, Uint8: safetensors.U8, Bool: safetensors.BOOL,
}

// SafetensorsDType maps an mx dtype to its safetensors name; ok is false for a dtype
// safetensors cannot store here.
func SafetensorsDType(d DType) (safetensors.DType, bool) {
	st, ok := toST[d]
	return st, ok
}

// DTypeFromSafetensors maps a safetensors dtype name to an mx dtype.
func DTypeFromSafetensors(d safetensors.DType) (DType, error) {
	for k, v := range toST {
		if v == d {
			return k, nil
		}
	}
	return 0, fmt.Errorf("mx: safetensors dtype %s is not supported", d)
}

// Checkpoint reads arrays lazily, one tensor at a time, from a safetensors file or a
// (possibly sharded) checkpoint directory.
type Checkpoint struct {
	e  Engine
	st interface {
		Names() []string
		Info(string) (safetensors.TensorInfo, bool)
		Data(string) ([]byte, error)
		ReadAt(name string, dst []byte, off int64) error
		FileOf(name string) (string, bool)
		Keep()
		Close() error
	}
	path string
}

// OpenCheckpoint opens a directory (model.safetensors.index.json, model.safetensors,
// or every *.safetensors in it) for lazy loading onto e.
func OpenCheckpoint(e Engine, dir string) (*Checkpoint, error) {
	c, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	return &Checkpoint{e: e, st: c, path: dir}, nil
}

// OpenSafetensors opens one safetensors file for lazy loading onto e.
func OpenSafetensors(e Engine, path string) (*Checkpoint, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	return &Checkpoint{e: e, st: f, path: path}, nil
}

// Names lists the tensors, sorted.
func (c *Checkpoint) Names() []string { return c.st.Names() }

// Info returns a tensor's dtype and shape without reading it.
func (c *Checkpoint) Info(name string) (DType, []int, error) {
	info, ok := c.st.Info(name)
	if !ok {
		return 0, nil, fmt.Errorf("%s: %w: %q", c.path, safetensors.ErrNotFound, name)
	}
	dt, err := DTypeFromSafetensors(info.DType)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: tensor %q: %w", c.path, name, err)
	}
	return dt, info.Shape, nil
}

// Load reads one tensor.
func (c *Checkpoint) Load(name string) (*Array, error) {
	dt, shape, err := c.Info(name)
	if err != nil {
		return nil, err
	}
	b, err := c.st.Data(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.path, err)
	}
	return FromBytes(c.e, b, shape, dt), nil
}

// Data returns a tensor's raw little-endian bytes (mapped, not copied: valid until Close),
// for callers that compare or copy tensors without making arrays of them.
func (c *Checkpoint) Data(name string) ([]byte, error) {
	b, err := c.st.Data(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.path, err)
	}
	return b, nil
}

// ReadAt copies bytes [off, off+len(dst)) of a tensor's raw data into dst with pread,
// leaving the memory map untouched (see safetensors.File.ReadAt).
func (c *Checkpoint) ReadAt(name string, dst []byte, off int64) error {
	if err := c.st.ReadAt(name, dst, off); err != nil {
		return fmt.Errorf("%s: %w", c.path, err)
	}
	return nil
}

// LoadMapped is Load for an engine that can use the file's mapped bytes in place (an
// InPlaceLoader: the go engine, for tensors whose elements need no conversion): the array
// then takes no heap memory — its pages are the file's, read in when first touched and
// never collected by Go's GC — and the checkpoint's files stay mapped for the life of the
// process, Close notwithstanding. Other tensors and engines are copied, as by Load.
func (c *Checkpoint) LoadMapped(name string) (*Array, error) {
	m, ok := c.e.(InPlaceLoader)
	if !ok {
		return c.Load(name)
	}
	dt, shape, err := c.Info(name)
	if err != nil {
		return nil, err
	}
	b, err := c.st.Data(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.path, err)
	}
	if prod(shape)*dt.Size() != len(b) {
		return nil, fmt.Errorf("%s: tensor %q: %d bytes for shape %v of %s", c.path, name, len(b), shape, dt)
	}
	if h, ok := m.FromMapped(b, shape, dt); ok {
		c.st.Keep()
		return Wrap(c.e, h), nil
	}
	return FromBytes(c.e, b, shape, dt), nil
}

// InPlaceLoader is implemented by engines that can hold an array in bytes they do not
// own (a mapped checkpoint): FromMapped returns ok false when it cannot use b in place
// (alignment, byte order, dtype), and the caller copies instead. The bytes must stay
// valid and unchanged for as long as the array lives.
type InPlaceLoader interface {
	FromMapped(b []byte, shape []int, dt DType) (h Handle, ok bool)
}

// FileLoader is implemented by engines that read safetensors files into their own
// memory themselves (the mlx engine: mlx_load_safetensors). The bytes then go from the
// file to the engine's buffers without a copy in Go memory and without the file's pages
// mapped into the process. LoadSafetensorsFile returns the named tensors of the file at
// path, evaluated (read), with the dtypes and shapes the file's header gives. An error
// wrapping errors.ErrUnsupported declines the file — a dtype the engine's reader lacks,
// or the engine told not to — and the caller reads it through Go instead.
type FileLoader interface {
	LoadSafetensorsFile(path string, names []string) (map[string]Handle, error)
}

// LoadAll reads the named tensors. On an engine that is a FileLoader it reads them file
// by file through the engine's own reader; otherwise, and for a file the engine
// declines, tensor by tensor as LoadMapped does. Either way each array has the dtype,
// shape and bytes the checkpoint stores.
func (c *Checkpoint) LoadAll(names []string) (map[string]*Array, error) {
	out := make(map[string]*Array, len(names))
	byFile := map[string][]string{}
	var files []string
	for _, n := range names {
		if _, _, err := c.Info(n); err != nil {
			return nil, err
		}
		f, ok := c.st.FileOf(n)
		if !ok {
			return nil, fmt.Errorf("%s: %w: %q", c.path, safetensors.ErrNotFound, n)
		}
		if _, seen := byFile[f]; !seen {
			files = append(files, f)
		}
		byFile[f] = append(byFile[f], n)
	}
	fl, native := c.e.(FileLoader)
	for _, f := range files {
		fileNames := byFile[f]
		if native {
			arrays, err := c.loadFile(fl, f, fileNames)
			if err == nil {
				for n, a := range arrays {
					out[n] = a
				}
				continue
			}
			if !errors.Is(err, errors.ErrUnsupported) {
				return nil, err
			}
		}
		for _, n := range fileNames {
			a, err := c.LoadMapped(n)
			if err != nil {
				return nil, err
			}
			out[n] = a
		}
	}
	return out, nil
}

// loadFile reads names from file f through the engine's reader and checks that each
// array is what the header (as this package parsed it) describes.
func (c *Checkpoint) loadFile(fl FileLoader, f string, names []string) (map[string]*Array, error) {
	hs, err := fl.LoadSafetensorsFile(f, names)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	out := make(map[string]*Array, len(names))
	for _, n := range names {
		h, ok := hs[n]
		if !ok {
			return nil, fmt.Errorf("%s: %s engine did not return tensor %q", f, c.e.Name(), n)
		}
		a := Wrap(c.e, h)
		dt, shape, _ := c.Info(n)
		if a.DType() != dt || !slices.Equal(a.Shape(), shape) {
			return nil, fmt.Errorf("%s: %s engine read tensor %q as %s %v, the header says %s %v", f, c.e.Name(), n, a.DType(), a.Shape(), dt, shape)
		}
		out[n] = a
	}
	return out, nil
}

// Close releases the mapped files. Arrays already loaded stay valid.
func (c *Checkpoint) Close() error { return c.st.Close() }

// LoadSafetensors reads every tensor of one file.
func LoadSafetensors(e Engine, path string) (map[string]*Array, map[string]string, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	c := &Checkpoint{e: e, st: f, path: path}
	out := map[string]*Array{}
	for _, n := range f.Names() {
		a, err := c.Load(n)
		if err != nil {
			return nil, nil, err
		}
		out[n] = a
	}
	return out, f.Metadata(), nil
}

// SaveSafetensors writes arrays atomically (temporary file, fsync, rename).
func SaveSafetensors(path string, arrays map[string]*Array, metadata map[string]string) error {
	names := make([]string, 0, len(arrays))
	for n := range arrays {
		names = append(names, n)
	}
	sort.Strings(names)
	ts := make([]safetensors.Tensor, 0, len(names))
	for _, n := range names {
		t, err := ToTensor(n, arrays[n])
		if err != nil {
			return err
		}
		ts = append(ts, t)
	}
	return safetensors.Write(path, ts, metadata)
}

// ToTensor encodes an array as a safetensors tensor (little-endian bytes).
func ToTensor(name string, a *Array) (safetensors.Tensor, error) {
	st, ok := toST[a.DType()]
	if !ok {
		return safetensors.Tensor{}, fmt.Errorf("mx: save %q: dtype %s", name, a.DType())
	}
	return safetensors.Tensor{Name: name, DType: st, Shape: a.Shape(), Data: Bytes(a)}, nil
}

// Bytes returns the array's elements as little-endian bytes.
func Bytes(a *Array) []byte {
	n := a.Size()
	b := make([]byte, n*a.DType().Size())
	switch v := a.Raw().(type) {
	case []float32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
	case []float64:
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
		}
	case []uint16:
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
	case []int32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
		}
	case []int64:
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
		}
	case []uint32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], x)
		}
	case []uint8:
		copy(b, v)
	case []bool:
		for i, x := range v {
			if x {
				b[i] = 1
			}
		}
	default:
		panic(fmt.Sprintf("mx: Bytes: unexpected %T", v))
	}
	return b
}
