// Package atomicfile writes files and directories so that a crash, a full disk, a failed
// write or an interrupted command never leaves a torn one: a file's bytes go to a temporary
// file in the same directory, which is synced and renamed over the target, and then the
// directory is synced; a directory's files go into a hidden staging directory beside it
// (StageDir), which is moved into place once complete or removed.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// WriteFile writes data to path atomically with mode 0644.
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write runs write against a temporary file next to path and, if it and the syncs
// succeed, renames it over path. On failure the temporary file is removed and path keeps
// its old contents.
func Write(path string, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	// CreateTemp makes the file 0600; outputs should be as readable as any file the user writes.
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes a rename in dir durable.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for syncing there
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// CheckWritable reports, before any work is done, whether Write will be able to write
// path: path must not be a directory, and its directory must take a new file — which is
// tried, by creating and removing a temporary file there as Write would (permission bits,
// read-only mounts, a full inode table and a missing directory all show up, for root too).
// The error names path.
func CheckWritable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".probe-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	name := tmp.Name()
	tmp.Close()
	return os.Remove(name)
}

// CheckDirCreatable reports, before any work is done, whether os.MkdirAll(dir) and then
// Write into it will succeed: dir's nearest existing ancestor must be a directory that
// takes a new file (tried as CheckWritable tries one).
func CheckDirCreatable(dir string) error {
	d := filepath.Clean(dir)
	for {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("cannot make %s: %s is not a directory", dir, d)
			}
			tmp, err := os.CreateTemp(d, ".dgtune-probe-*")
			if err != nil {
				var pe *os.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				return fmt.Errorf("cannot make %s: %s: %w", dir, d, err)
			}
			name := tmp.Name()
			tmp.Close()
			return os.Remove(name)
		}
		// A missing component, or one that is a file (ENOTDIR): look further up, where
		// the file shows as what it is.
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("cannot make %s: %w", dir, err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return fmt.Errorf("cannot make %s: no existing ancestor", dir)
		}
		d = parent
	}
}
