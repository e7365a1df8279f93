package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// StagedDir is a directory being written: everything goes into a hidden directory beside
// its destination, which takes the destination's place (Replace) or gives it its files
// (MoveInto) only once complete. Remove, or a failure, deletes the hidden directory and the
// parent directories StageDir created, so an error or an interrupted command leaves nothing.
//
// Remove may run on another goroutine than the writer's (a command abandoned after a
// signal removes its staging while its work is still in flight); Replace and MoveInto
// then fail instead of publishing a directory removed under them.
type StagedDir struct {
	Path string // the hidden directory to write into

	out     string
	mu      sync.Mutex
	created string // the outermost parent directory StageDir created, "" when none
	done    bool   // published or removed
}

// StageDir creates the hidden directory ".<base of out>.tmp-*" (mode 0755) beside out,
// and out's missing parent directories. The errors are the file system's, naming the path.
func StageDir(out string) (*StagedDir, error) {
	out = filepath.Clean(out)
	parent := filepath.Dir(out)
	created, err := mkdirAllTracked(parent)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".tmp-")
	if err == nil {
		err = os.Chmod(tmp, 0o755) // MkdirTemp makes it 0700
	}
	if err != nil {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		if created != "" {
			os.RemoveAll(created)
		}
		return nil, err
	}
	return &StagedDir{Path: tmp, out: out, created: created}, nil
}

// mkdirAllTracked creates dir and its missing parents, returning the outermost directory
// it created ("" if dir existed).
func mkdirAllTracked(dir string) (string, error) {
	first := ""
	for d := dir; ; {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		first = d
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	if first == "" {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		os.RemoveAll(first)
		return "", err
	}
	return first, nil
}

// errRemoved is Replace or MoveInto after Remove.
var errRemoved = errors.New("staged directory already removed")

// Replace moves the finished directory onto out. An existing out is first renamed aside
// and deleted only once the new directory is in place, so at every moment out is either
// the old directory or the complete new one (or, between two renames, absent — never
// partial). Both directories are synced, so the renames are durable.
func (s *StagedDir) Replace() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errRemoved
	}
	parent := filepath.Dir(s.out)
	if err := SyncDir(s.Path); err != nil {
		return err
	}
	var old string
	if _, err := os.Lstat(s.out); err == nil {
		aside, err := os.MkdirTemp(parent, "."+filepath.Base(s.out)+".old-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(aside)
		old = filepath.Join(aside, "old")
		if err := os.Rename(s.out, old); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(s.Path, s.out); err != nil {
		if old != "" {
			_ = os.Rename(old, s.out)
		}
		return err
	}
	s.done = true
	return SyncDir(parent)
}

// MoveInto moves every entry of the finished directory into out (created if need be):
// entries of the same name are replaced, the others out holds are kept.
func (s *StagedDir) MoveInto() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errRemoved
	}
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(s.Path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(s.Path, e.Name()), filepath.Join(s.out, e.Name())); err != nil {
			return err
		}
	}
	s.done = true
	os.Remove(s.Path)
	return SyncDir(s.out)
}

// Remove deletes the staged directory and the parents StageDir created; a no-op once
// Replace or MoveInto has succeeded.
func (s *StagedDir) Remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	os.RemoveAll(s.Path)
	if s.created != "" {
		os.RemoveAll(s.created)
	}
}

// Copy copies the file src to dst atomically (Write).
func Copy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return Write(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}
