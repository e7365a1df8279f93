#!/usr/bin/env python3
"""Where a run's GPU sat idle, from an Nsight Systems kernel trace.

    nsys profile -o run --trace=cuda CMD...
    nsys stats --report cuda_gpu_trace --format csv --output run run.nsys-rep
    python3 bench/gpu_busy.py run_cuda_gpu_trace.csv [--gap-ms 2]

Kernels and copies are merged into busy intervals; an idle gap longer than --gap-ms
ends a segment. With one host synchronisation per training step, each segment is one
step's device work and the gap before it the host's time (building the next graph,
reading the loss). Prints, per segment: its span, the kernel time inside it, its kernel
count and the idle gap that preceded it.
"""
import argparse
import csv
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--gap-ms", type=float, default=2.0)
    ap.add_argument("--last", type=int, default=12, help="segments to print")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.trace)))
    if not rows:
        sys.exit("no rows in " + a.trace)
    start = next(k for k in rows[0] if k.startswith("Start"))
    dur = next(k for k in rows[0] if k.startswith("Duration"))
    ev = sorted((float(r[start]), float(r[dur])) for r in rows if r.get(dur))
    gap = a.gap_ms * 1e6
    segs = []  # [begin, end, busy, kernels, gap_before]
    for s, d in ev:
        if not segs or s - segs[-1][1] > gap:
            segs.append([s, s + d, d, 1, s - segs[-1][1] if segs else 0.0])
            continue
        seg = segs[-1]
        seg[2] += max(0.0, s + d - max(s, seg[1])) if s < seg[1] else d
        seg[1] = max(seg[1], s + d)
        seg[3] += 1
    print(f"# {len(ev)} kernels and copies, {len(segs)} segments split at idle gaps over {a.gap_ms} ms")
    print("# segment: span ms, busy ms, busy %, kernels, idle gap before ms")
    for i, (b, e, busy, n, g) in enumerate(segs[-a.last:], len(segs) - min(a.last, len(segs))):
        print(f"{i:4d} {(e - b) / 1e6:9.2f} {busy / 1e6:9.2f} {100 * busy / (e - b):6.1f} {n:7d} {g / 1e6:9.2f}")


if __name__ == "__main__":
    main()
