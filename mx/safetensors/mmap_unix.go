//go:build unix

package safetensors

import (
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file privately. The mapping is writable
// copy-on-write so that code which scribbles on a tensor view changes its own
// pages rather than faulting or touching the file. The descriptor is closed
// at once; the mapping outlives it.
func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	size := st.Size()
	if size < 8 {
		// Too short to map usefully (mmap of 0 bytes fails); parseHeader
		// reports it.
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, 0); err != nil {
			return nil, nil, err
		}
		return buf, func() error { return nil }, nil
	}
	if size > math.MaxInt {
		return nil, nil, fmt.Errorf("%s: %d bytes is too large to map", path, size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
