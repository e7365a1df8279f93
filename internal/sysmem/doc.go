// Package sysmem tells how much memory this process can use: the machine's RAM, or the
// memory limit of its Linux control group (a container's) when that is lower — the number
// an out-of-memory kill is decided against. PeakRSS tells how much it has used at most.
package sysmem
