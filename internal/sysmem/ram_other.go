//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package sysmem

// totalRAM is unknown here: the memory check then says so instead of comparing.
func totalRAM() int64 { return 0 }
