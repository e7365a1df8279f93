package runlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHolder is not a test: run as a child process with RUNLOCK_DIR set, it takes the lock,
// says so on stdout and waits to be killed.
func TestHolder(t *testing.T) {
	dir := os.Getenv("RUNLOCK_DIR")
	if dir == "" {
		t.Skip("helper process")
	}
	if _, _, err := Acquire(dir); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	select {}
}

// holder starts a child process that holds dir's lock and returns it once it does.
func holder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHolder$")
	cmd.Env = append(os.Environ(), "RUNLOCK_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("holder: %q", line)
	}
	return cmd
}

func TestAcquireRelease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	l, stale, err := Acquire(dir)
	if err != nil || stale != nil {
		t.Fatalf("Acquire = %v, stale %v", err, stale)
	}
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if o := readOwner(b); o.PID != os.Getpid() || o.Host != host || o.Started.IsZero() {
		t.Errorf("lock file records %+v, want pid %d on %s", o, os.Getpid(), host)
	}
	// A second holder — another open file, as another process would have — is refused,
	// naming the first.
	_, _, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) || held.Owner.PID != os.Getpid() || held.Dir != dir {
		t.Fatalf("second Acquire = %v, want a HeldError naming pid %d", err, os.Getpid())
	}
	want := fmt.Sprintf("%s is in use by another training run (pid %d on %s, started ", dir, os.Getpid(), host)
	if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "): wait for it to end or stop it, or choose another --adapter-path") {
		t.Errorf("refusal %q, want %q...", err, want)
	}
	if o, err := Probe(dir); err != nil || o == nil || o.PID != os.Getpid() {
		t.Errorf("Probe of a held lock = %v, %v", o, err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	// Acquire made the directory and nothing else was written: it is gone again.
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Release: %s still there (%v)", dir, err)
	}
	if o, err := Probe(dir); o != nil || err != nil {
		t.Errorf("Probe of a released lock = %v, %v", o, err)
	}
	// A directory that holds other files stays.
	l, _, err = Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "adapters.safetensors"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l.Release()
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "adapters.safetensors" {
		t.Errorf("after Release: %v, want only adapters.safetensors", entries)
	}
}

// TestOtherProcess: a lock held by a live process refuses this one, naming its pid; once
// that process is killed (SIGKILL: it releases nothing) the file it left is stale, and
// Acquire replaces it and says whose it was.
func TestOtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	dir := t.TempDir()
	child := holder(t, dir)
	pid := child.Process.Pid
	_, _, err := Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) || held.Owner.PID != pid {
		t.Fatalf("Acquire while pid %d holds the lock: %v", pid, err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(pid)+" on ") {
		t.Errorf("refusal %q does not name pid %d", err, pid)
	}
	if o, err := Probe(dir); err != nil || o == nil || o.PID != pid {
		t.Errorf("Probe = %v, %v; want pid %d", o, err, pid)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	if _, err := os.Stat(filepath.Join(dir, File)); err != nil {
		t.Fatalf("the killed holder's lock file: %v", err)
	}
	if o, err := Probe(dir); o != nil || err != nil {
		t.Errorf("Probe of a stale lock = %v, %v; want nil", o, err)
	}
	l, stale, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if stale == nil || stale.PID != pid {
		t.Fatalf("stale = %v, want pid %d", stale, pid)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, File)); readOwner(b).PID != os.Getpid() {
		t.Errorf("lock file after replacing: %s", b)
	}
}
