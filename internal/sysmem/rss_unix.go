//go:build linux || darwin || freebsd || netbsd || openbsd

package sysmem

import (
	"runtime"
	"syscall"
)

// PeakRSS is the process's peak resident set size in bytes (getrusage's ru_maxrss, which
// Linux and the BSDs count in KiB and macOS in bytes).
func PeakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) << 10
}
