package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		self  string
		files map[string]string
		want  int64
	}{
		{"v2", "0::/user.slice/job\n", map[string]string{"user.slice/job/memory.max": "8589934592\n"}, 8 << 30},
		{"v2 no limit", "0::/job\n", map[string]string{"job/memory.max": "max\n"}, 0},
		{"v2 namespaced", "0::/\n", map[string]string{"memory.max": "1073741824\n"}, 1 << 30},
		{"v1", "4:memory:/docker/abc\n3:cpu:/\n", map[string]string{"memory/docker/abc/memory.limit_in_bytes": "2147483648\n"}, 2 << 30},
		{"v1 hidden path", "4:memory:/process_api/x\n", map[string]string{"memory/memory.limit_in_bytes": "4294967296\n"}, 4 << 30},
		{"v1 no limit", "4:memory:/\n", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0},
		{"none", "0::/\n", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "self"), tc.self)
			for p, s := range tc.files {
				write(t, filepath.Join(dir, "root", p), s)
			}
			if got := cgroupLimit(filepath.Join(dir, "self"), filepath.Join(dir, "root")); got != tc.want {
				t.Errorf("cgroupLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestDetect: on the systems it knows, Detect finds a plausible amount: more than 64 MiB
// (this test binary runs in it) and below 64 TiB.
func TestDetect(t *testing.T) {
	m := Detect()
	if totalRAM() == 0 {
		t.Skip("RAM size unknown on this system")
	}
	if m.Bytes < 64<<20 || m.Bytes > 64<<40 || (m.Source != "RAM" && m.Source != "cgroup limit") {
		t.Errorf("Detect() = %+v", m)
	}
}
