package session

import (
	"os"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

func TestOpenEngineRefusals(t *testing.T) {
	cases := []struct {
		name, backend, dtype string
		limitGB              float64
		want                 string // error substring; "" = opens
	}{
		{"float32 on go", "go", "float32", 0, ""},
		{"default dtype", "go", "", 0, ""},
		{"bfloat16 needs mlx", "go", "bfloat16", 0, "compute_dtype bfloat16 needs the mlx engine (the go engine computes in float32)"},
		{"unknown dtype", "go", "float16", 0, `compute_dtype "float16": want float32 or bfloat16`},
		{"limit needs an allocator", "go", "float32", 8, "memory_limit_gb 8: the go engine has no allocator limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := OpenEngine(c.backend, c.dtype, c.limitGB)
			if c.want == "" {
				if err != nil || e == nil {
					t.Fatalf("OpenEngine: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestComputeDType(t *testing.T) {
	for name, want := range map[string]mx.DType{"": mx.Float32, "float32": mx.Float32, "bfloat16": mx.BFloat16} {
		got, err := ComputeDType(name)
		if err != nil || got != want {
			t.Errorf("ComputeDType(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
}

// TestOpenEngineTensorCores: bfloat16 compute on any engine but go turns MLX's TF32 switch
// on (its grouped GEMM's tensor cores hang on it), float32 leaves it alone, and a value
// the user set wins.
func TestOpenEngineTensorCores(t *testing.T) {
	cases := []struct {
		name, backend, dtype string
		user                 string // "" = unset
		want                 string // "" = still unset
	}{
		{"bfloat16 on auto", "auto", "bfloat16", "", "1"},
		{"bfloat16 on mlx", "mlx", "bfloat16", "", "1"},
		{"bfloat16 on go", "go", "bfloat16", "", ""},
		{"float32 on auto", "auto", "float32", "", ""},
		{"user's 0 wins", "auto", "bfloat16", "0", "0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(tf32Env, c.user) // restored after the test
			if c.user == "" {
				os.Unsetenv(tf32Env)
			}
			// The go engine (CI's) refuses bfloat16 after the switch is decided; the mlx
			// engine opens. Either way the variable is what is checked.
			_, _ = OpenEngine(c.backend, c.dtype, 0)
			got, set := os.LookupEnv(tf32Env)
			if (c.want == "") == set || got != c.want {
				t.Fatalf("%s = %q (set %v), want %q", tf32Env, got, set, c.want)
			}
		})
	}
}
