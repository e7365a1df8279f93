//go:build darwin || freebsd || netbsd || openbsd

package sysmem

import (
	"runtime"

	"golang.org/x/sys/unix"
)

func totalRAM() int64 {
	name := "hw.physmem"
	if runtime.GOOS == "darwin" {
		name = "hw.memsize"
	}
	n, err := unix.SysctlUint64(name)
	if err != nil {
		return 0
	}
	return int64(n)
}
