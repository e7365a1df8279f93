//go:build mlx

package main

import (
	"encoding/json"
	"testing"
)

// TestBenchLookaheadMLX: on the mlx engine bench builds each step while the previous one
// runs, as train does, and says so; --synchronous waits every step.
func TestBenchLookaheadMLX(t *testing.T) {
	dir := t.TempDir()
	mustProbe(t, "mkmodel", "--preset", "tiny", "--out", dir)
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--synchronous"}, false},
		{[]string{"--compile"}, true},
	} {
		args := append([]string{"bench", "--model", dir, "--prompt-len", "8", "--canvas-len", "8", "--steps", "2", "--backend", "mlx", "--json"}, tc.args...)
		var r map[string]any
		if err := json.Unmarshal([]byte(mustProbe(t, args...)), &r); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got, _ := r["lookahead"].(bool); got != tc.want {
			t.Errorf("%v: lookahead %v, want %v", tc.args, r["lookahead"], tc.want)
		}
		if ms, _ := r["ms_per_step"].(float64); !(ms > 0) {
			t.Errorf("%v: ms_per_step %v", tc.args, r["ms_per_step"])
		}
	}
}
