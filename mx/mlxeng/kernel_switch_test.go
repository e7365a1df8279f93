//go:build mlx

package mlxeng

import "testing"

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
