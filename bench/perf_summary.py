#!/usr/bin/env python3
"""Summarise bench/perf_ab.sh's results: per cell, the median tokens/s of every dgtune build
(4-bit and float32) and of each peer configuration over the alternating rounds, the ratio of each
dgtune median to the best peer configuration's median, the per-round values, the real geometry,
and a 2-thread bench step's GFLOP/s against the FMA peak of two cores measured in the same run.

Each build other than the baseline (main, when it is one of the builds) is also compared with it
round by round: the median of its per-round ratios of tokens/s, the rounds it was faster in, the
two-sided sign test's p for that count, and the ratio of the medians of CPU time a step. On a noisy
host, rounds swing together; pairs from one round are the fairer comparison.

    python3 bench/perf_summary.py OUT/results.jsonl [OUT/sgemm.txt]
"""

import json
import math
import re
import statistics
import sys

# Products of one training step, 2·Σ m·n·k over every sgemm product, as GOENG_OPPROF counts them
# (products (sgemm): … GFLOP per step) on this commit's go engine: bench (128/256, rank 8) and
# small (64/64), 4-bit and float32.
STEP_GFLOP = {("bench", "4-bit"): 42.477, ("bench", "f32"): 41.856, ("small", "4-bit"): 3.328, ("small", "f32"): 3.328}


def sign_test(wins, n):
    """Two-sided sign test: the chance of a split at least this uneven if either build were as
    likely to win a round."""
    k = min(wins, n - wins)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    runs = {}  # (who, cell) -> [(round, tokens/s, ms/step)]
    real = []
    for r in rows:
        item, res = r.get("item", ""), r.get("result")
        if item == "env":
            print("env:", json.dumps({k: v for k, v in r.items() if k != "item"}))
            continue
        if "/real/" in item:
            real.append((item, res, r.get("error")))
            continue
        if r.get("round", 0) < 1 or "cpuprofile" in item:
            continue
        if res is None:
            print("error:", item, "round", r.get("round"), (r.get("error") or "")[-300:].replace("\n", " | "))
            continue
        if item.startswith("hf-"):
            cfg, cell = item[3:].split("/")
            who = "peer " + cfg
        else:
            name, cell, bits = item.split("/")
            who = "%s %s" % (name, {"bits4": "4-bit", "bits0": "f32"}[bits])
        runs.setdefault((who, cell), []).append((r["round"], res["tokens_per_sec"], res["ms_per_step"], res.get("cpu_ms_per_step")))

    peak = None
    if len(sys.argv) > 2:
        try:
            vals = [float(m.group(1)) for m in re.finditer(r"FMAPeak/zmm/w2-2\s+\d+\s+\d+ ns/op\s+([\d.]+) GFLOP/s", open(sys.argv[2]).read())]
            if vals:
                peak = statistics.median(vals)
                print("FMA peak, 2 cores (zmm, median of %d): %.1f GFLOP/s" % (len(vals), peak))
        except OSError:
            pass

    cells = sorted({c for _, c in runs}, key=lambda c: ("small" in c, c.endswith("16")))
    for cell in cells:
        med = {who: statistics.median(v[1] for v in vs) for (who, c), vs in runs.items() if c == cell}
        peers = {w: m for w, m in med.items() if w.startswith("peer")}
        best = max(peers.values()) if peers else None
        print("\n## %s (medians of tokens/s; ratio to the best peer configuration's median)" % cell)
        for who in sorted(med):
            vs = sorted(runs[(who, cell)])
            line = "%-16s median %7.1f  rounds %s" % (who, med[who], ", ".join("%.0f" % v[1] for v in vs))
            if best and not who.startswith("peer"):
                line += "  ratio %.2fx" % (med[who] / best)
            if peak and cell == "bench2" and not who.startswith("peer"):
                ms = statistics.median(v[2] for v in vs)
                g = STEP_GFLOP[("bench", who.split()[-1])] / (ms / 1000)
                line += "  %.0f GFLOP/s = %.0f%% of peak" % (g, 100 * g / peak)
            print(line)
        paired(runs, cell, sorted(med))
    if real:
        print("\n## real 26B-A4B geometry, 4-bit, 128/256, 16 threads")
        for item, res, err in real:
            if res:
                print("%-40s %.2f s/step, peak RSS %.1f GB" % (item, res["ms_per_step"] / 1000, res["peak_rss_bytes"] / 1e9))
            else:
                print(item, "error:", (err or "")[-300:])


def paired(runs, cell, whos):
    """Print each build's round-by-round comparison with the baseline build of the same bits."""
    names = sorted({w.split()[0] for w in whos if not w.startswith("peer")})
    if len(names) < 2:
        return
    base = "main" if "main" in names else names[0]
    for bits in ("4-bit", "f32"):
        ref = {v[0]: v for v in runs.get(("%s %s" % (base, bits), cell), [])}
        for name in names:
            if name == base or ("%s %s" % (name, bits), cell) not in runs:
                continue
            pairs = [(v, ref[v[0]]) for v in runs[("%s %s" % (name, bits), cell)] if v[0] in ref]
            if not pairs:
                continue
            wins = sum(1 for a, b in pairs if a[1] > b[1])
            line = "  %s %s against %s: per-round ratio median %.3f, faster in %d of %d rounds (sign test p = %.2f)" % (
                name, bits, base, statistics.median(a[1] / b[1] for a, b in pairs), wins, len(pairs), sign_test(wins, len(pairs)))
            cpu = [(a[3], b[3]) for a, b in pairs if a[3] and b[3]]
            if cpu:
                line += ", CPU a step %.3f×" % (statistics.median(a for a, _ in cpu) / statistics.median(b for _, b in cpu))
            print(line)


if __name__ == "__main__":
    main()
