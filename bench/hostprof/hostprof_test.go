package hostprof

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSamplesBusyProcess builds hostprof.so, preloads it into a shell that counts, and
// checks the samples: one line each, "tid seconds lib+offset ...", timestamps in order.
// summary.py then summarizes them.
func TestSamplesBusyProcess(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the sampler")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to sample")
	}
	dir := t.TempDir()
	so := filepath.Join(dir, "hostprof.so")
	if out, err := exec.Command(cc, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", so, filepath.Join("src", "hostprof.c"), "-ldl", "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	samples := filepath.Join(dir, "hp.txt")
	// About 1.5 s of the shell's own arithmetic here (no child processes), sampled from
	// 0.2 s to its exit (the samples reach the file every 0.5 s). The timer counts the
	// process's CPU time, so a busy machine only stretches the run.
	busy := exec.Command(sh, "-c", `i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done`)
	busy.Env = append(os.Environ(), "LD_PRELOAD="+so, "HOSTPROF_OUT="+samples, "HOSTPROF_START=0.2", "HOSTPROF_SECONDS=600", "HOSTPROF_HZ=500")
	if out, err := busy.CombinedOutput(); err != nil {
		t.Fatalf("the sampled shell: %v\n%s", err, out)
	}
	b, err := os.ReadFile(samples)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// ~1 s of CPU time flushed at 500 Hz is a few hundred samples (the kernel's tick may
	// coarsen the timer: 250 Hz here); fewer than 50 means the handler is not sampling.
	if len(lines) < 50 {
		t.Fatalf("%d samples, want at least 50:\n%s", len(lines), b)
	}
	// A thread's samples are in time order: its handler runs to the end before the next
	// signal reaches it. Across threads they need not be (SIGPROF goes to any thread, and
	// two handlers can take their places in the buffer in one order and read the clock
	// in the other), and summary.py does not assume they are.
	last := map[int]float64{}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 {
			t.Fatalf("line %d %q: want tid, seconds and at least one frame", i, l)
		}
		tid, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("line %d %q: tid: %v", i, l, err)
		}
		sec, err := strconv.ParseFloat(f[1], 64)
		if err != nil || sec < last[tid] {
			t.Fatalf("line %d %q: seconds %v after thread %d's %v (err %v)", i, l, sec, tid, last[tid], err)
		}
		last[tid] = sec
		for _, fr := range f[2:] {
			if !strings.Contains(fr, "+") {
				t.Fatalf("line %d %q: frame %q is not lib+offset", i, l, fr)
			}
		}
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return
	}
	if _, err := exec.LookPath("addr2line"); err != nil {
		return
	}
	out, err := exec.Command(py, filepath.Join("src", "summary.py"), samples, "/nonexistent", "--threads", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("summary.py: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "samples in the window") || !strings.Contains(string(out), "### inclusive") {
		t.Errorf("summary.py printed %q", out)
	}
}
