package main

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgtune/dgtune/internal/runlock"
)

// startTrain starts the built command on args and waits until it holds the lock of
// adapters and has saved a checkpoint past step from (so it has written there). It returns
// the process and a channel that receives its exit.
func startTrain(t *testing.T, bin, adapters string, from int, stderr *bytes.Buffer, args ...string) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	waitFor(t, "training progress", 60*time.Second, func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("train exited early: %v\n%s", err, stderr.String())
		default:
		}
		return readOwner(t, filepath.Join(adapters, runlock.File)) == cmd.Process.Pid && stateStep(t, adapters) > from
	})
	return cmd, done
}

// snapshot is every file of dir with its bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // renamed or removed since the listing
		}
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// TestLock runs two real train processes into one adapter_path at once: the second refuses
// in one line naming the first's pid and host and writes nothing, with or without --resume
// and --overwrite; the first finishes its run (interrupted with SIGINT, the lock is gone).
// Then a run killed with SIGKILL leaves its lock file, and the next run replaces it and
// says whose it was.
func TestLock(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it as child processes")
	}
	bin := buildTrain(t)
	f := newFixture(t)
	cfg := f.config(t, "")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	lockFile := filepath.Join(f.adapters, runlock.File)

	var firstErr bytes.Buffer
	first, done := startTrain(t, bin, f.adapters, 1, &firstErr, "--config", cfg, "--iters", "100000", "--save-every", "2")
	pid := first.Process.Pid
	refusal := regexp.MustCompile(`^train: adapter_path ` + regexp.QuoteMeta(f.adapters) + ` is in use by another training run \(pid ` +
		strconv.Itoa(pid) + ` on ` + regexp.QuoteMeta(host) + `, started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\): wait for it to end or stop it, or choose another --adapter-path\n$`)
	// While the first run is stopped (SIGSTOP: it keeps its lock and writes nothing), the
	// second one must leave every file of the folder as it was.
	if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The signal stops it between two system calls, maybe mid-save: wait until the folder
	// holds still.
	before := snapshot(t, f.adapters)
	waitFor(t, "the stopped run's folder to hold still", 10*time.Second, func() bool {
		time.Sleep(50 * time.Millisecond)
		now := snapshot(t, f.adapters)
		same := maps.Equal(before, now)
		before = now
		return same
	})
	for _, extra := range [][]string{nil, {"--resume"}, {"--overwrite"}} {
		second := exec.Command(bin, append([]string{"--config", cfg, "--iters", "3"}, extra...)...)
		var stdout, stderr bytes.Buffer
		second.Stdout, second.Stderr = &stdout, &stderr
		err := second.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || stdout.Len() != 0 || !refusal.MatchString(stderr.String()) {
			t.Errorf("second run %v: %v, stdout %q, stderr %q; want exit 1 and %s", extra, err, stdout.String(), stderr.String(), refusal)
		}
		if after := snapshot(t, f.adapters); !maps.Equal(before, after) {
			t.Errorf("second run %v changed the folder: %v → %v", extra, slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
		}
	}
	if err := first.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// A dry run writes nothing, so it does not need the lock: it says train would refuse.
	code, stdout, stderr := runMain("--config", cfg, "--dry-run", "--resume")
	if code != 0 || !strings.Contains(stdout, "dry run: the data fits") ||
		!strings.Contains(stderr, "note: adapter_path "+f.adapters+" is in use by another training run (pid "+strconv.Itoa(pid)+" on "+host+", started ") {
		t.Errorf("dry run beside a live run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if err := first.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
		done <- err
	case <-time.After(60 * time.Second):
		t.Fatalf("first run did not stop\n%s", firstErr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("first run: %v, want exit 130\n%s", err, firstErr.String())
	}
	if _, err := os.Stat(lockFile); !os.IsNotExist(err) {
		t.Errorf("the interrupted run left its lock file (%v)", err)
	}

	// Killed outright, a run releases nothing: its lock file stays, and the next run
	// replaces it and says whose it was.
	var killedErr bytes.Buffer
	killed, kdone := startTrain(t, bin, f.adapters, stateStep(t, f.adapters), &killedErr, "--config", cfg, "--resume", "--iters", "100000", "--save-every", "2")
	kpid := killed.Process.Pid
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = <-kdone
	kdone <- err
	if readOwner(t, lockFile) != kpid {
		b, err := os.ReadFile(lockFile)
		t.Fatalf("the killed run's lock file does not name pid %d: %q %v\n%s", kpid, b, err, killedErr.String())
	}
	k := stateStep(t, f.adapters)
	code, stdout, stderr = runMain("--config", cfg, "--resume", "--iters", strconv.Itoa(k+1))
	if code != 0 || !strings.HasPrefix(stdout, "trained "+strconv.Itoa(k+1)+" steps") {
		t.Fatalf("run after the killed one: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	stale := regexp.MustCompile(`(?m)^lock: replaced the lock of pid ` + strconv.Itoa(kpid) + ` on ` + regexp.QuoteMeta(host) +
		`, started [0-9: -]+ in ` + regexp.QuoteMeta(f.adapters) + `: that run ended without releasing it \(killed or crashed\)$`)
	if !stale.MatchString(stderr) {
		t.Errorf("stderr does not report the stale lock (%s):\n%s", stale, stderr)
	}
	if _, err := os.Stat(lockFile); !os.IsNotExist(err) {
		t.Errorf("the finished run left its lock file (%v)", err)
	}
	// (The killed run may have left an atomic write's temporary file; the output checks
	// leave none.)
	for name := range snapshot(t, f.adapters) {
		if strings.Contains(name, ".probe-") {
			t.Errorf("output check's file %s left", name)
		}
	}
}

// readOwner is the pid a lock file names (0 if none).
func readOwner(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`"pid":(\d+)`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
