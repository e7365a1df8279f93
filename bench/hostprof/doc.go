// Package hostprof holds src/hostprof.c, an LD_PRELOAD sampler of a process's host CPU time
// for machines without perf, gdb or nsys, and src/summary.py, which names its samples. The
// package has no Go code of its own; its test builds the sampler and runs it on a busy
// process.
package hostprof
