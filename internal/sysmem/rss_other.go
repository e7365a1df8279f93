//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package sysmem

// PeakRSS is 0 where getrusage is not available: the reports then show only what the
// engine counts itself.
func PeakRSS() int64 { return 0 }
