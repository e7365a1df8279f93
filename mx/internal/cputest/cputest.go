package cputest

import (
	"os"
	"testing"
)

// RequireEnv is the environment variable that turns a skipped AVX-512 test into a failure.
const RequireEnv = "GOENG_REQUIRE_AVX512"

// RequireAVX512 returns when has (the package's own AVX-512F check) holds; otherwise it
// skips the test, or fails it when RequireEnv is 1.
func RequireAVX512(t testing.TB, has bool) {
	t.Helper()
	if has {
		return
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s=1, but this CPU (or OS) lacks AVX-512F: the AVX-512 kernels were not tested", RequireEnv)
	}
	t.Skipf("CPU without AVX-512F (%s=1 makes this a failure)", RequireEnv)
}
