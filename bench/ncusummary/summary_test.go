package ncusummary

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummary runs ncu_summary.py on a two-step CSV shaped as Nsight Compute writes it (a
// preamble, the header, the units row, then one row a kernel) and checks what it reads:
// the second step only, the categories, and with --per-layer one forward and one backward
// layer between the marker kernels, summed by finer categories. It skips without python3.
func TestSummary(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	// One step: a forward of three layers (marker fwd_mark), a backward of three (bwd_mark).
	layer := func(marker string, rows *[]string) {
		*rows = append(*rows,
			`"x","`+marker+`(int)","100"`,
			`"x","void mlx::custom_kernel_dgtune_dequantize_bfloat16_t_4_64(const unsigned int *)","20"`,
			`"x","nvjet_sm90_tst_96x64_64x10_1x2_h_bz_TNN","10"`,
			`"x","void mlx::gather<__nv_bfloat16, int>(const T1 *)","5"`,
			`"x","mlx::custom_kernel_dgtune_lora_forward_8_4_8_1090519040_false(const __nv_bfloat16 *)","4"`,
			`"x","void mlx::Df4IBroadcastCEf4IMultiply_contiguous<unsigned int, 8>(const float *)","3"`)
	}
	var step []string
	for range 3 {
		layer("mlx::custom_kernel_dgtune_experts_t_1408_2816", &step)
	}
	for range 3 {
		layer("mlx::custom_kernel_dgtune_experts_f_2816_1408", &step)
	}
	csv := []string{`==PROF== Connected to process 1`, `"ID","Kernel Name","gpu__time_duration.sum"`, `"","","usecond"`}
	for range 2 {
		csv = append(csv, step...)
	}
	path := filepath.Join(t.TempDir(), "steps.csv")
	if err := os.WriteFile(path, []byte(strings.Join(csv, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, filepath.Join("..", "ncu_summary.py"), path, "--top", "2",
		"--per-layer", "experts_t_1408,experts_f_2816_1408", "--layer-index", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("ncu_summary.py: %v\n%s", err, out)
	}
	for _, want := range []string{
		"# one step: 36 kernels, 0.85 ms of kernel time", // 6 layers × 142 us
		"0.12  14.1%      6  dequantize",
		"0.06   7.0%      6  other GEMM (cuBLAS, CUTLASS)",
		"## forward intervals (kernels:us): 6:142 6:142",
		"## backward intervals (kernels:us): 6:142 6:142",
		"     200.0     2  experts kernel",
		"      40.0     2  dequantize",
		"      10.0     2  gather / scatter",
		"       8.0     2  LoRA kernels",
		"       6.0     2  elementwise",
		"     284.0    12  layer total",
	} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("no line %q in\n%s", want, out)
		}
	}
	// Too few markers for the interval asked: a clear error, not a traceback.
	out, err = exec.Command(py, filepath.Join("..", "ncu_summary.py"), path, "--per-layer", "experts_t_1408,nothing", "--layer-index", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--per-layer: 0 kernels named 'nothing' in the step, want 3 or more") {
		t.Errorf("missing marker: err %v, output\n%s", err, out)
	}
}
