package mx_test

import (
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestGoEngineHasNoGroup: the go engine cannot join a distributed group, and says how
// to get an engine that can.
func TestGoEngineHasNoGroup(t *testing.T) {
	e := mxtest.Go(t)
	if mx.HasDistributed(e) {
		t.Fatal("the go engine claims a distributed layer")
	}
	for _, bk := range []string{"ring", "mpi", "any"} {
		_, err := mx.JoinGroup(e, bk, true)
		if err == nil || !strings.Contains(err.Error(), "-tags mlx") {
			t.Errorf("%s: err = %v, want one that says to build with -tags mlx", bk, err)
		}
	}
	if _, err := mx.JoinGroup(e, "nccl", true); err == nil || !strings.Contains(err.Error(), `backend "nccl"`) {
		t.Errorf("nccl: err = %v", err)
	}
}
