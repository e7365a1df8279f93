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
	for _, bk := range []string{"ring", "nccl", "mpi", "any"} {
		_, err := mx.JoinGroup(e, bk, true)
		if err == nil || !strings.Contains(err.Error(), "-tags mlx") {
			t.Errorf("%s: err = %v, want one that says to build with -tags mlx", bk, err)
		}
		if mx.HasBackend(e, bk) {
			t.Errorf("HasBackend(go, %s) = true", bk)
		}
	}
	if _, err := mx.JoinGroup(e, "jaccl", true); err == nil || !strings.Contains(err.Error(), `backend "jaccl": want ring, nccl, mpi or any`) {
		t.Errorf("jaccl: err = %v", err)
	}
}
