//go:build mlx

package train

import (
	"strings"
	"testing"
)

// TestPeakMemoryMLX: with the mlx engine every report carries MLX's own counters (active,
// peak and cache memory), in metrics.jsonl and on the log line.
func TestPeakMemoryMLX(t *testing.T) {
	evs, log := memoryEvents(t, "mlx")
	if len(evs) != 2 {
		t.Fatalf("%d train events, want 2", len(evs))
	}
	for _, ev := range evs {
		m := ev.Engine
		if m == nil || m.Peak <= 0 || m.Peak < m.Active || m.Cache < 0 {
			t.Errorf("engine memory %+v, want MLX's counters with peak ≥ active > 0", m)
		}
	}
	if !strings.Contains(log, "(engine peak ") {
		t.Errorf("log lacks the engine's counters:\n%s", log)
	}
}
