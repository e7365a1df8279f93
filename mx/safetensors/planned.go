package safetensors

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
)

// Planned is a safetensors file written in two steps: Create writes the header, computed
// from the tensors' names, dtypes and shapes alone, and WriteAt then fills each tensor's
// bytes, piece by piece and in any order. It is how a converter writes a file larger than
// its memory: no tensor ever has to be whole in memory. The layout is Write's (sorted
// names, 8-byte aligned data), so a Planned file and a Write of the same tensors are
// byte-identical.
//
// WriteAt may be called from several goroutines for disjoint pieces. Close checks that
// every byte of every tensor was written exactly once (by count), syncs and closes; Abort
// closes and removes the file. Planned does not rename anything: callers that need an
// atomic result write into a staging directory.
type Planned struct {
	path    string
	f       *os.File
	dataPos int64
	mu      sync.Mutex
	slots   map[string]*plannedSlot
	order   []string
}

type plannedSlot struct {
	offset, size, written int64
}

// CreatePlanned creates path (truncating it) and writes the header of tensors, whose Data
// must be empty; the data region is sized but left for WriteAt.
func CreatePlanned(path string, tensors []Tensor, metadata map[string]string) (*Planned, error) {
	if err := checkMetadata(path, metadata); err != nil {
		return nil, err
	}
	sorted := slices.Clone(tensors)
	slices.SortFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	sizes := make([]int, len(sorted))
	p := &Planned{path: path, slots: make(map[string]*plannedSlot, len(sorted))}
	var total int64
	for i, t := range sorted {
		if len(t.Data) != 0 {
			return nil, fmt.Errorf("safetensors: create %s: tensor %q: a planned tensor carries no data (got %d bytes)", path, t.Name, len(t.Data))
		}
		n, err := checkSpec(path, t)
		if err != nil {
			return nil, err
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, formatErr(path, t.Name, ErrDuplicate, "given twice")
		}
		sizes[i] = n
		p.slots[t.Name] = &plannedSlot{offset: total, size: int64(n)}
		p.order = append(p.order, t.Name)
		total += int64(n)
	}
	header, err := planHeader(path, sorted, sizes, metadata)
	if err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: create %s: %w", path, err)
	}
	p.f = f
	p.dataPos = 8 + int64(len(header))
	var n8 [8]byte
	binary.LittleEndian.PutUint64(n8[:], uint64(len(header)))
	if _, err := f.Write(append(n8[:], header...)); err != nil {
		p.Abort()
		return nil, fmt.Errorf("safetensors: create %s: %w", path, err)
	}
	if err := f.Truncate(p.dataPos + total); err != nil {
		p.Abort()
		return nil, fmt.Errorf("safetensors: create %s: %w", path, err)
	}
	return p, nil
}

// Path returns the file's path.
func (p *Planned) Path() string { return p.path }

// WriteAt writes b at byte off of the named tensor's data.
func (p *Planned) WriteAt(name string, b []byte, off int64) error {
	s, ok := p.slots[name]
	if !ok {
		return formatErr(p.path, name, ErrNotFound, "not planned in this file")
	}
	if off < 0 || off > s.size || int64(len(b)) > s.size-off {
		return formatErr(p.path, name, ErrOffsets, "write of %d bytes at %d is outside the tensor's %d bytes", len(b), off, s.size)
	}
	if _, err := p.f.WriteAt(b, p.dataPos+s.offset+off); err != nil {
		return fmt.Errorf("safetensors: write %s: tensor %q: %w", p.path, name, err)
	}
	p.mu.Lock()
	s.written += int64(len(b))
	p.mu.Unlock()
	return nil
}

// Close checks that every tensor got exactly its bytes, then syncs and closes the file.
// On an incomplete file it returns an error naming the first short tensor and leaves the
// file for Abort.
func (p *Planned) Close() error {
	for _, name := range p.order {
		if s := p.slots[name]; s.written != s.size {
			return formatErr(p.path, name, ErrSize, "%d of its %d bytes were written", s.written, s.size)
		}
	}
	if err := p.f.Sync(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", p.path, err)
	}
	if err := p.f.Close(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", p.path, err)
	}
	p.f = nil
	return nil
}

// Abort closes the file, if still open, and removes it.
func (p *Planned) Abort() {
	if p.f != nil {
		_ = p.f.Close()
		p.f = nil
	}
	_ = os.Remove(p.path)
}
