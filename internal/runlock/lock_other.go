//go:build !unix

package runlock

import (
	"errors"
	"fmt"
	"os"
)

// acquire creates path exclusively. A file already there is stale when it names this host
// and a pid that no longer runs; it is removed and the creation tried again.
func acquire(path string, me Owner) (*os.File, *Owner, error) {
	var stale *Owner
	for attempt := 0; attempt < 3; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			if _, err := f.Write(encodeOwner(me)); err != nil {
				f.Close()
				os.Remove(path)
				return nil, nil, fmt.Errorf("lock %s: %w", path, err)
			}
			return f, stale, f.Sync()
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, nil, fmt.Errorf("lock: %w", err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue // released meanwhile
		}
		o := readOwner(b)
		if o.Host != me.Host || running(o.PID) {
			return nil, nil, &HeldError{Owner: o}
		}
		stale = &o
		os.Remove(path)
	}
	return nil, nil, fmt.Errorf("lock %s: the file keeps being replaced", path)
}

func probe(path string) (*Owner, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	o := readOwner(b)
	host, _ := os.Hostname()
	if o.Host == host && !running(o.PID) {
		return nil, nil
	}
	return &o, nil
}

// running reports whether a process pid exists (FindProcess opens it on Windows).
func running(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
