package cputest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRequireAVX512 runs a test that calls RequireAVX512 with has false in a child
// process (the test binary itself, -test.run selecting the helper below): without
// RequireEnv it skips, with RequireEnv=1 it fails naming the variable; with has true it
// passes either way.
func TestRequireAVX512(t *testing.T) {
	if os.Getenv("CPUTEST_CHILD") != "" {
		return
	}
	for _, tc := range []struct {
		has     string
		require string
		fail    bool
		want    string
	}{
		{"false", "", false, "SKIP"},
		{"false", "1", true, RequireEnv + "=1, but this CPU (or OS) lacks AVX-512F"},
		{"true", "", false, "PASS"},
		{"true", "1", false, "PASS"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChild$", "-test.v")
		cmd.Env = append(os.Environ(), "CPUTEST_CHILD="+tc.has, RequireEnv+"="+tc.require)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.fail || !strings.Contains(string(out), tc.want) {
			t.Errorf("has %s, %s=%q: failed %v (%v), want %v and output containing %q\n%s", tc.has, RequireEnv, tc.require, failed, err, tc.fail, tc.want, out)
		}
	}
}

// TestChild is TestRequireAVX512's child: RequireAVX512 with has from CPUTEST_CHILD.
func TestChild(t *testing.T) {
	has := os.Getenv("CPUTEST_CHILD")
	if has == "" {
		t.Skip("run by TestRequireAVX512")
	}
	RequireAVX512(t, has == "true")
}
