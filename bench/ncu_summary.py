#!/usr/bin/env python3
"""ncu_summary.py — where a step's GPU time goes, from an Nsight Compute CSV.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
        --log-file steps.csv probe-mlx bench ... --warmup 1 --steps 1
    python3 bench/ncu_summary.py steps.csv [--steps-in-file 2]

The file holds every kernel of the warm-up and timed steps in launch order; the summary
takes the last 1/N of them (N = --steps-in-file) as one step. It prints the step's kernel
time by category (the expert GEMMs, dequantize, quantized matmuls, other GEMMs, float32
and other elementwise work) and the kernels that take the most time, with launches per step.
"""
import argparse
import collections
import csv
import sys


def category(name):
    if "GemmGrouped" in name:
        return "grouped GEMM (experts, gather_mm)"
    if "dequantize" in name:
        return "dequantize"
    if "qmm" in name or "qmv" in name:
        return "quantized matmul (qmm)"
    if any(k in name for k in ("gemm", "nvjet", "sgemm", "xmma", "splitK")):
        return "other GEMM (cuBLAS, CUTLASS)"
    if "<float" in name or "float, float" in name or "float, __nv" in name:
        return "float32 elementwise / copy"
    return "bfloat16 and other kernels"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps-in-file", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    rows = list(csv.reader(open(a.csv)))
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None:
        sys.exit("no ncu header row (ID, ..., Kernel Name, ...) in " + a.csv)
    hdr = rows[start]
    name_i, time_i = hdr.index("Kernel Name"), hdr.index("gpu__time_duration.sum")
    unit = rows[start + 1][time_i]
    scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}[unit]
    kernels = [(r[name_i], float(r[time_i].replace(",", "")) * scale)
               for r in rows[start + 2:] if len(r) == len(hdr)]
    step = kernels[len(kernels) - len(kernels) // a.steps_in_file:]
    total = sum(t for _, t in step)
    print(f"# one step: {len(step)} kernels, {total:.2f} ms of kernel time")
    by_cat, n_cat = collections.Counter(), collections.Counter()
    by_name, n_name = collections.Counter(), collections.Counter()
    for name, t in step:
        c = category(name)
        by_cat[c] += t
        n_cat[c] += 1
        short = name.split("(")[0][:110]
        by_name[short] += t
        n_name[short] += 1
    print("## by category: ms, share, kernels")
    for c, t in by_cat.most_common():
        print(f"{t:9.2f} {100 * t / total:5.1f}% {n_cat[c]:6d}  {c}")
    print(f"## top {a.top} kernels: ms, share, launches, mean us")
    for k, t in by_name.most_common(a.top):
        print(f"{t:9.2f} {100 * t / total:5.1f}% {n_name[k]:6d} {1000 * t / n_name[k]:9.1f}  {k}")
    short = sum(1 for _, t in step if t < 0.005)
    print(f"## {short} of {len(step)} kernels ran under 5 us")


if __name__ == "__main__":
    main()
