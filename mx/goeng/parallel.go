package goeng

import "github.com/dgtune/dgtune/mx/internal/par"

// parallelFor runs body over [0, n) in contiguous chunks on up to GOMAXPROCS goroutines
// (par.For): cost is the approximate work per item, and small jobs run inline.
func parallelFor(n int, cost int, body func(lo, hi int)) { par.For(n, cost, body) }
