package train

import (
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// memoryEvents runs two steps with the given backend and returns the train events' memory
// fields and the log.
func memoryEvents(t *testing.T, backend string) ([]TrainReport, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Backend, cfg.Iters, cfg.AdapterPath = backend, 2, filepath.Join(dir, backend)
	var log strings.Builder
	if _, err := Run(context.Background(), cfg, Options{Log: &log}); err != nil {
		t.Fatal(err)
	}
	var out []TrainReport
	for _, line := range strings.Split(strings.TrimSpace(string(readBytes(t, filepath.Join(cfg.AdapterPath, MetricsFile)))), "\n") {
		var ev struct {
			Event string `json:"event"`
			TrainReport
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event == "train" {
			out = append(out, ev.TrainReport)
		}
	}
	return out, log.String()
}

// TestPeakMemoryGoEngine: the go engine keeps no allocator counters, so a report carries
// the process's peak RSS (from getrusage, also on macOS) and no engine_memory.
func TestPeakMemoryGoEngine(t *testing.T) {
	evs, log := memoryEvents(t, "go")
	if len(evs) != 2 {
		t.Fatalf("%d train events, want 2", len(evs))
	}
	for _, ev := range evs {
		if ev.Engine != nil {
			t.Errorf("go engine reported engine memory %+v", ev.Engine)
		}
		if (runtime.GOOS == "linux" || runtime.GOOS == "darwin") && ev.PeakMemory < 1<<20 {
			t.Errorf("peak_memory_bytes %d: a process that loaded a model holds more than 1 MiB", ev.PeakMemory)
		}
	}
	if strings.Contains(log, "engine peak") {
		t.Errorf("log shows engine counters for the go engine:\n%s", log)
	}
}
