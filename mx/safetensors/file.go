package safetensors

import (
	"fmt"
	"maps"
	"os"
	"slices"
)

// File is an open safetensors file. Its header is parsed and validated by
// Open; tensor bytes are read lazily, through the memory map, when used.
//
// All methods except Close may be called concurrently. Close must not race
// with the others.
type File struct {
	path    string
	hdr     *header
	mapped  []byte // the whole file
	release func() error
	closed  bool
	kept    bool
}

// Open maps the file at path and validates its header. The file is held
// open (mapped) until Close.
func Open(path string) (*File, error) {
	data, release, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	h, err := parseHeader(path, data)
	if err != nil {
		_ = release()
		return nil, err
	}
	return &File{path: path, hdr: h, mapped: data, release: release}, nil
}

// Path returns the path the file was opened with.
func (f *File) Path() string { return f.path }

// FileOf returns the path of the file holding the named tensor (f's own), and false
// when f has no such tensor.
func (f *File) FileOf(name string) (string, bool) {
	_, ok := f.hdr.tensors[name]
	return f.path, ok
}

// Names returns the tensor names in sorted order.
func (f *File) Names() []string { return slices.Clone(f.hdr.names) }

// Info returns the description of the named tensor. The Shape is a copy.
func (f *File) Info(name string) (TensorInfo, bool) {
	info, ok := f.hdr.tensors[name]
	info.Shape = slices.Clone(info.Shape)
	return info, ok
}

// Metadata returns a copy of the file's __metadata__ (empty, not nil, when
// the file has none).
func (f *File) Metadata() map[string]string { return maps.Clone(f.hdr.metadata) }

// Data returns the named tensor's bytes, little-endian, row-major, without
// copying. The slice is valid until Close; after that, touching it faults.
// Writing into it is allowed and changes only this process's copy of the
// page (the mapping is private copy-on-write): the file never changes. The
// slice's start is 8-byte aligned only if the tensor's offset is.
func (f *File) Data(name string) ([]byte, error) {
	if f.closed {
		return nil, formatErr(f.path, name, ErrClosed, "file already closed")
	}
	info, ok := f.hdr.tensors[name]
	if !ok {
		return nil, formatErr(f.path, name, ErrNotFound, "no such tensor")
	}
	begin, end := f.hdr.dataPos+info.Offsets[0], f.hdr.dataPos+info.Offsets[1]
	return f.mapped[begin:end:end], nil
}

// Keep makes the mapping outlive Close: slices returned by Data stay valid for the life
// of the process (the pages are the file's, paged in and out by the kernel, and are never
// unmapped). An engine that uses tensor bytes in place asks for it.
func (f *File) Keep() { f.kept = true }

// Close unmaps the file (unless Keep was called). Slices returned by Data must not be
// used after it.
func (f *File) Close() error {
	if f.closed {
		return formatErr(f.path, "", ErrClosed, "file already closed")
	}
	f.closed = true
	f.mapped = nil
	if f.kept {
		return nil
	}
	if err := f.release(); err != nil {
		return fmt.Errorf("safetensors: close %s: %w", f.path, err)
	}
	return nil
}

// ReadAt copies bytes [off, off+len(dst)) of the named tensor's data into dst with
// pread, without touching the memory map: a caller that streams a file larger than
// memory (convert) reads it this way so that the pages it has read stay in the page
// cache, not in its resident set.
func (f *File) ReadAt(name string, dst []byte, off int64) error {
	if f.closed {
		return formatErr(f.path, name, ErrClosed, "file already closed")
	}
	info, ok := f.hdr.tensors[name]
	if !ok {
		return formatErr(f.path, name, ErrNotFound, "no such tensor")
	}
	size := int64(info.Size())
	if off < 0 || off > size || int64(len(dst)) > size-off {
		return formatErr(f.path, name, ErrOffsets, "read of %d bytes at %d is outside the tensor's %d bytes", len(dst), off, size)
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer fh.Close()
	if _, err := fh.ReadAt(dst, int64(f.hdr.dataPos)+int64(info.Offsets[0])+off); err != nil {
		return fmt.Errorf("safetensors: read %s: tensor %q: %w", f.path, name, err)
	}
	return nil
}
