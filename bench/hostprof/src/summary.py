#!/usr/bin/env python3
"""summary.py: where the sampled threads' CPU time goes, from hostprof.so's samples.

    python3 bench/hostprof/src/summary.py hp.txt LIBDIR [--top 30] [--window 6] [--threads 2]

LIBDIR holds the libraries of the machine that ran (libmlx.so: for MLX-CUDA, the packed
prefix's lib/); addr2line names their frames, and frames of other libraries are shown
by library. --window keeps the samples of the last N seconds before the last one (the
timed steps of a benchmark whose warm-up came first). For each of the busiest threads
it prints the functions where samples landed (self) and those on the stack (inclusive).
"""
import argparse
import collections
import os
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("samples")
    ap.add_argument("libdir")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--window", type=float, default=1e9)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    raw = []
    with open(a.samples) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3:
                raw.append((int(p[0]), float(p[1]), p[2:]))
    if not raw:
        raise SystemExit(f"{a.samples}: no samples")
    end = max(t for _, t, _ in raw)
    # The last 0.3 s are the process's exit.
    samples = [(tid, frames) for tid, t, frames in raw if end - a.window <= t <= end - 0.3]

    offsets = collections.defaultdict(set)
    for _, frames in samples:
        for fr in frames:
            lib, off = fr.rsplit("+", 1)
            if os.path.exists(os.path.join(a.libdir, lib)):
                offsets[lib].add(off)
    names = {}
    for lib, offs in offsets.items():
        offs = sorted(offs)
        out = subprocess.run(["addr2line", "-f", "-C", "-e", os.path.join(a.libdir, lib)] + ["0x" + o for o in offs],
                             capture_output=True, text=True, check=True).stdout.split("\n")
        for i, o in enumerate(offs):
            names[lib + "+" + o] = out[2 * i][:160]

    def name(fr):
        return names.get(fr, fr.rsplit("+", 1)[0])

    threads = collections.Counter(t for t, _ in samples)
    print(f"# {len(samples)} samples in the window; by thread: {threads.most_common(8)}")
    for tid, n in threads.most_common(a.threads):
        stacks = [fr for t, fr in samples if t == tid and fr]
        own = collections.Counter(name(fr[0]) for fr in stacks)
        incl = collections.Counter()
        for fr in stacks:
            incl.update(set(name(f) for f in fr))
        print(f"## thread {tid}: {n} samples\n### self")
        for fn, c in own.most_common(a.top):
            print(f"{100 * c / n:6.1f}% {fn}")
        print("### inclusive")
        for fn, c in incl.most_common(a.top):
            print(f"{100 * c / n:6.1f}% {fn}")


if __name__ == "__main__":
    main()
