#!/usr/bin/env python3
"""ncu_summary.py — where a step's GPU time goes, from an Nsight Compute CSV.

    ncu --cache-control none --clock-control none \
        --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --page raw \
        --log-file steps.csv probe-mlx bench ... --warmup 1 --steps 1
    python3 bench/ncu_summary.py steps.csv [--steps-in-file 2] [--per-layer FWD,BWD]

The file holds every kernel of the warm-up and timed steps in launch order; the summary
takes the last 1/N of them (N = --steps-in-file) as one step. It prints the step's kernel
time by category (the expert GEMMs, dequantize, quantized matmuls, other GEMMs, float32
and other elementwise work) and the kernels that take the most time, with launches per step.

Pass --cache-control none: by default ncu flushes the caches before every kernel, so each
small kernel reads DRAM cold and looks several times slower than in the step, whose
activations sit in the L2 (the real geometry's 6-layer step: 31.2 ms cold, 29.5 warm).

--per-layer FWD,BWD splits the step at the launches of kernels whose names hold FWD (one a
layer in the forward) and BWD (one a layer in the backward) — for dgtune's fused experts
kernel on the real geometry, "experts_t_1408,experts_f_2816_1408", its gate/up product each
way — and prints every interval between launches (kernels and time: the intervals differ
with the layer's kind, and the compiled step may schedule other work between them), then,
for interval --layer-index (default 2: from the third launch to the fourth) of each, the
time and launches by finer categories and their sum: what a layer costs forward and backward.
--list prints that interval's kernels in launch order as well (time, category, short name).
"""
import argparse
import collections
import csv
import re
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


def layer_category(name):
    """A finer category for one layer's kernels (--per-layer)."""
    for keys, cat in ((("expert_order",), "sort"), (("experts",), "experts kernel"), (("dgtune_lora",), "LoRA kernels"),
                      (("geglu",), "GeGLU kernels"), (("norm_rope",), "rope"),
                      (("GemmGrouped",), "grouped GEMM (experts)"),
                      (("dequantize",), "dequantize"), (("qmm", "qmv"), "quantized matmul"),
                      (("gemm", "nvjet", "xmma", "splitK", "Gemm"), "GEMM (cuBLAS, CUTLASS)"),
                      (("scatter", "gather"), "gather / scatter"), (("sort",), "sort"),
                      (("rms_norm",), "rms_norm"), (("rope",), "rope"), (("reduce",), "reductions"),
                      (("copy",), "copies"), (("softmax",), "softmax")):
        if any(k in name for k in keys):
            return cat
    return "elementwise"


def short_name(name):
    """A kernel's name without its arguments, namespace and compiled-kernel hash."""
    n = name.split("(")[0].replace("void ", "").replace("mlx::", "")
    return re.sub(r"_\d{10,}", "", n)[:110]


def per_layer(step, markers, index, listing=False):
    """Prints every interval between markers, then one forward and one backward layer's
    kernel time (the interval after the index-th launch of each marker) by layer_category;
    with listing, that interval's kernels too, in launch order."""
    total, count = collections.Counter(), collections.Counter()
    for direction, marker in zip(("forward", "backward"), markers.split(",")):
        at = [i for i, (name, _) in enumerate(step) if marker in name]
        if len(at) < index + 2:
            sys.exit(f"--per-layer: {len(at)} kernels named {marker!r} in the step, want {index + 2} or more")
        spans = [f"{at[j + 1] - at[j]}:{1000 * sum(x for _, x in step[at[j]:at[j + 1]]):.0f}" for j in range(len(at) - 1)]
        print(f"## {direction} intervals (kernels:us): {' '.join(spans)}")
        if listing:
            print(f"## {direction}, interval {index}: us, category, kernel")
            for name, x in step[at[index]:at[index + 1]]:
                print(f"{1000 * x:9.1f}  {layer_category(name)[:12]:12s}  {short_name(name)}")
        for name, x in step[at[index]:at[index + 1]]:
            total[layer_category(name)] += x
            count[layer_category(name)] += 1
    print(f"## a layer, forward + backward (interval {index} of each): us, launches, category")
    for c, x in total.most_common():
        print(f"{1000 * x:10.1f} {count[c]:5d}  {c}")
    print(f"{1000 * sum(total.values()):10.1f} {sum(count.values()):5d}  layer total")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps-in-file", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--per-layer", metavar="FWD,BWD", help="split the step at kernels named FWD and BWD (see above)")
    ap.add_argument("--layer-index", type=int, default=2, help="which interval between markers --per-layer details")
    ap.add_argument("--list", action="store_true", help="with --per-layer, list that interval's kernels in launch order")
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
    if a.per_layer:
        per_layer(step, a.per_layer, a.layer_index, a.list)


if __name__ == "__main__":
    main()
