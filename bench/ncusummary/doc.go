// Package ncusummary tests bench/ncu_summary.py, which summarizes an Nsight Compute CSV
// of a training step's kernels (by category, the top kernels, and one layer forward and
// backward). The package has no Go code of its own.
package ncusummary
