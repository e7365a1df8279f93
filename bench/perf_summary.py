#!/usr/bin/env python3
"""Summarise bench/perf_ab.sh's results: per cell, the median tokens/s of every dgtune build
(4-bit and float32) and of each peer configuration over the alternating rounds, the ratio of each
dgtune median to the best peer configuration's median, the per-round values, the real geometry,
and a 2-thread bench step's GFLOP/s against the FMA peak of two cores measured in the same run.

    python3 bench/perf_summary.py OUT/results.jsonl [OUT/sgemm.txt]
"""

import json
import re
import statistics
import sys

# Products of one bench step (128/256, rank 8) and one small step (64/64): 2·Σ m·n·k over every
# sgemm product of a training step, counted on this commit's go engine (4-bit and float32 alike).
STEP_GFLOP = {"bench": 42.862, "small": 3.362}


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
        runs.setdefault((who, cell), []).append((r["round"], res["tokens_per_sec"], res["ms_per_step"]))

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
                g = STEP_GFLOP["bench"] / (ms / 1000)
                line += "  %.0f GFLOP/s = %.0f%% of peak" % (g, 100 * g / peak)
            print(line)
    if real:
        print("\n## real 26B-A4B geometry, 4-bit, 128/256, 16 threads")
        for item, res, err in real:
            if res:
                print("%-40s %.2f s/step, peak RSS %.1f GB" % (item, res["ms_per_step"] / 1000, res["peak_rss_bytes"] / 1e9))
            else:
                print(item, "error:", (err or "")[-300:])


if __name__ == "__main__":
    main()
