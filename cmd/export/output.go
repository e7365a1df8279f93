package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// staging is an export being written: everything goes into a hidden directory beside the
// destination, which is renamed onto it only once complete. A failure (or an abort) removes
// the hidden directory and any parent directories this export created, so nothing is left.
type staging struct {
	out     string
	tmp     string
	created string // the outermost parent directory created for out, "" when none
	release func() // unregisters abort from cli.OnAbandon
}

// newStaging checks that out is free (absent, or an empty directory) and creates the
// hidden directory next to it.
func newStaging(out string) (*staging, error) {
	out = filepath.Clean(out)
	if err := checkFree(out); err != nil {
		return nil, err
	}
	parent := filepath.Dir(out)
	created, err := mkdirAllTracked(parent)
	if err != nil {
		return nil, fmt.Errorf("--out %s: %w", out, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".tmp-")
	if err != nil {
		if created != "" {
			os.RemoveAll(created)
		}
		return nil, fmt.Errorf("--out %s: %w", out, err)
	}
	return &staging{out: out, tmp: tmp, created: created}, nil
}

// checkFree accepts a destination that does not exist or is an empty directory.
func checkFree(out string) error {
	st, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("--out %s exists and is not a directory", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("--out %s exists and is not empty (refusing to overwrite it)", out)
	}
	return nil
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

// commit moves the finished directory into place (replacing an empty destination) and
// syncs the parent so the rename is durable.
func (s *staging) commit() error {
	if err := checkFree(s.out); err != nil {
		return err
	}
	if err := os.Chmod(s.tmp, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", s.out, err)
	}
	if err := os.Remove(s.out); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--out %s: %w", s.out, err)
	}
	if err := os.Rename(s.tmp, s.out); err != nil {
		return fmt.Errorf("--out %s: %w", s.out, err)
	}
	s.tmp, s.created = "", ""
	if s.release != nil {
		s.release()
	}
	if d, err := os.Open(filepath.Dir(s.out)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// abort removes whatever the export wrote; a no-op after commit.
func (s *staging) abort() {
	if s.release != nil {
		s.release()
	}
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
	if s.created != "" {
		os.RemoveAll(s.created)
	}
}

// copyFile copies src to dst and syncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeFile writes b to a new file and syncs it.
func writeFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
