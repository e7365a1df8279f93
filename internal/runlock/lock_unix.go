//go:build unix

package runlock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// acquire opens (or creates) path, takes flock's exclusive lock without waiting, and
// writes me into it. A file whose lock it gets while it holds an owner was left by a run
// that died: that owner is returned as stale.
func acquire(path string, me Owner) (*os.File, *Owner, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("lock: %w", err)
		}
		if err := flock(f, unix.LOCK_EX); err != nil {
			defer f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, nil, &HeldError{Owner: ownerOf(f)}
			}
			return nil, nil, fmt.Errorf("lock %s: %w", path, err)
		}
		// The holder before us removes the file before it unlocks: if we locked a file
		// that is no longer at path, try again on the one that is.
		if !samePath(f, path) {
			f.Close()
			if attempt < 10 {
				continue
			}
			return nil, nil, fmt.Errorf("lock %s: the file keeps being replaced", path)
		}
		old, err := io.ReadAll(f)
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("lock %s: %w", path, err)
		}
		var stale *Owner
		if len(old) > 0 {
			o := readOwner(old)
			stale = &o
		}
		if err := rewrite(f, encodeOwner(me)); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return f, stale, nil
	}
}

func probe(path string) (*Owner, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	defer f.Close()
	err = flock(f, unix.LOCK_SH)
	if errors.Is(err, unix.EWOULDBLOCK) {
		o := ownerOf(f)
		return &o, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return nil, unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// flock takes how (LOCK_EX or LOCK_SH) without blocking, retrying on EINTR.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// ownerOf reads the holder's record from a locked file. A run writes it right after it
// takes the lock, so an empty file is read again for a moment.
func ownerOf(f *os.File) Owner {
	for range 50 {
		if b, err := os.ReadFile(f.Name()); err == nil && len(b) > 0 {
			if o := readOwner(b); o.PID != 0 {
				return o
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return Owner{}
}

// samePath reports whether the open file f is still the file at path.
func samePath(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	if err != nil {
		return false
	}
	return os.SameFile(a, b)
}

func rewrite(f *os.File, b []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Sync()
}
