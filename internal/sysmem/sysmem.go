package sysmem

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is what this process can use, in bytes, and where the number comes from.
type Memory struct {
	Bytes  int64  // 0: unknown on this system
	Source string // "RAM" or "cgroup limit"
}

// Detect returns the smaller of the machine's RAM and this process's cgroup memory limit.
func Detect() Memory {
	m := Memory{Bytes: totalRAM(), Source: "RAM"}
	if lim := cgroupLimit("/proc/self/cgroup", "/sys/fs/cgroup"); lim > 0 && (m.Bytes == 0 || lim < m.Bytes) {
		m = Memory{Bytes: lim, Source: "cgroup limit"}
	}
	return m
}

// cgroupLimit reads the memory limit of the cgroup that the file at self (the format of
// /proc/self/cgroup) names under the cgroup mount root: memory.max (v2) or
// memory.limit_in_bytes (v1), at the group's path or, inside a container whose namespace
// hides it, at the mount's root. 0 means no limit (or none found).
func cgroupLimit(self, root string) int64 {
	b, err := os.ReadFile(self)
	if err != nil {
		return 0
	}
	var candidates []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			candidates = append(candidates, filepath.Join(root, parts[2], "memory.max"), filepath.Join(root, "memory.max"))
		case strings.Contains(","+parts[1]+",", ",memory,"):
			candidates = append(candidates, filepath.Join(root, "memory", parts[2], "memory.limit_in_bytes"), filepath.Join(root, "memory", "memory.limit_in_bytes"))
		}
	}
	for _, c := range candidates {
		b, err := os.ReadFile(c)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// v1 writes "no limit" as the largest page-aligned int64.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}
