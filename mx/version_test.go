package mx_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func TestDescribe(t *testing.T) {
	g := mxtest.Go(t)
	if lib, v := mx.Library("go"); lib != "" || v != "" {
		t.Errorf("Library(go) = %q %q, want none", lib, v)
	}
	if d := mx.Describe(g); d != "go" {
		t.Errorf("Describe(go) = %q", d)
	}
	d := mx.DescribeEngines()
	if !strings.HasPrefix(d, "go") {
		t.Errorf("DescribeEngines() = %q", d)
	}
	if slices.Contains(mx.Engines(), "mlx") != strings.Contains(d, "mlx on MLX ") {
		t.Errorf("DescribeEngines() = %q with engines %v", d, mx.Engines())
	}
	// Without MLX the oracle of the go engine is the go engine itself.
	if f := mxtest.GoFollowing(t, g); f.Name() != "go" {
		t.Errorf("GoFollowing(go) = %s", f.Name())
	}
}
