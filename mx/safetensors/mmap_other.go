//go:build !unix

package safetensors

import (
	"fmt"
	"os"
)

// mapFile reads the whole file where mmap is not available. The buffer is
// sized from the file's length, never from its header.
func mapFile(path string) ([]byte, func() error, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
