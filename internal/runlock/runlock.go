package runlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File is the lock's name in the directory it guards.
const File = "train.lock"

// Owner is the run that holds (or held) a lock, as its lock file records it.
type Owner struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

func (o Owner) String() string {
	if o.PID == 0 {
		return "a run that has not written its pid yet"
	}
	s := fmt.Sprintf("pid %d on %s", o.PID, o.Host)
	if !o.Started.IsZero() {
		s += ", started " + o.Started.Local().Format("2006-01-02 15:04:05")
	}
	return s
}

// HeldError is Acquire's refusal: another live run holds the lock of Dir.
type HeldError struct {
	Dir   string
	Owner Owner
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is in use by another training run (%s): wait for it to end or stop it, or choose another --adapter-path", e.Dir, e.Owner)
}

// Lock is a held lock; Release gives it up.
type Lock struct {
	dir     string
	f       *os.File
	created bool // Acquire made dir: Release removes it again if nothing else was written
}

// Dir is the directory the lock guards.
func (l *Lock) Dir() string { return l.dir }

// Acquire takes the lock of dir, creating dir when it does not exist. It fails with a
// *HeldError when a live run holds it. stale is the owner of a lock file left by a run
// that ended without releasing it (killed), which Acquire replaced; nil when there was
// none.
func Acquire(dir string) (l *Lock, stale *Owner, err error) {
	created := false
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
		created = true
	}
	defer func() {
		if err != nil && created {
			os.Remove(dir) // only if still empty
		}
	}()
	host, err := os.Hostname()
	if err != nil {
		host = "unknown host"
	}
	me := Owner{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second)}
	f, stale, err := acquire(filepath.Join(dir, File), me)
	if err != nil {
		var held *HeldError
		if errors.As(err, &held) {
			held.Dir = dir
		}
		return nil, nil, err
	}
	return &Lock{dir: dir, f: f, created: created}, stale, nil
}

// Release removes the lock file and gives up the lock (in that order, so that a run
// waiting on the old file finds it gone and takes a fresh one); a directory Acquire created
// goes too if nothing else was written there. It is safe to call more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(filepath.Join(l.dir, File))
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if l.created {
		os.Remove(l.dir) // fails, as it should, unless empty
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}

// Probe reports the live owner of dir's lock without taking it: nil when no run holds it
// (no lock file, or a stale one).
func Probe(dir string) (*Owner, error) {
	return probe(filepath.Join(dir, File))
}

// readOwner parses a lock file's content; an empty or unreadable one is the zero Owner.
func readOwner(b []byte) Owner {
	var o Owner
	if json.Unmarshal(b, &o) != nil {
		return Owner{}
	}
	return o
}

func encodeOwner(o Owner) []byte {
	b, _ := json.Marshal(o)
	return append(b, '\n')
}
