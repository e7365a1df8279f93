package engines_test

import (
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/engines"
)

// TestDrawsOnTheGoEngine: an engine not on MLX draws on itself.
func TestDrawsOnTheGoEngine(t *testing.T) {
	e, err := mx.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	if d := engines.Draws(e); d != e {
		t.Fatalf("Draws(go) = %s engine %p, want the engine itself %p", d.Name(), d, e)
	}
}
