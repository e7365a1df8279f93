//go:build mlx

package mlxeng

import (
	"math"
	"testing"
)

// kernelSwitch is one case of an engine kernel's switch: on device, with the environment
// variable set to value, whether the kernel is made.
type kernelSwitch struct {
	device, value string
	want          bool
}

// checkKernelSwitch runs made for each case and compares it with the case's want. The
// cases that make a kernel run only where the engine has CUDA: MLX without it refuses
// custom CUDA kernels.
func checkKernelSwitch(t *testing.T, env string, cases []kernelSwitch, made func(device, value string) bool) {
	t.Helper()
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if c.want && !isCUDA(e.device) {
			continue
		}
		if got := made(c.device, c.value); got != c.want {
			t.Errorf("%s=%q on %s: kernel made %v, want %v", env, c.value, c.device, got, c.want)
		}
	}
}

// nearScaled fails the test at the first value of got farther from want's than rel of
// it plus rel/8 of want's largest magnitude: a kernel's values against another
// computation's that rounds differently (rel 1/128: two roundings to bfloat16).
func nearScaled(t *testing.T, what string, got, want []float32, rel float64) {
	t.Helper()
	scale := 0.0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	for i, v := range want {
		if diff := math.Abs(float64(got[i] - v)); diff > math.Abs(float64(v))*rel+scale*rel/8 {
			t.Fatalf("%s[%d] = %v, want %v (scale %v)", what, i, got[i], v, scale)
		}
	}
}
