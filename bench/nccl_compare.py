#!/usr/bin/env python3
"""nccl_compare.py — the numbers bench/nccl_run.sh reports, with Python's standard library only
(the GPU machine's python3 has no safetensors reader of ours).

  nccl_compare.py adapters A.safetensors B.safetensors TOL
      per tensor ‖a−b‖/‖b‖ (Frobenius) and the largest elementwise |a−b|/max|b|; exit 1 when any
      tensor's ‖a−b‖/‖b‖ exceeds TOL, or the files hold different tensors.
  nccl_compare.py metrics DIR_A DIR_B
      the largest relative difference of the train and val losses of two runs' metrics.jsonl
      (same events, iterations and trained tokens required).
  nccl_compare.py speed DIR [FROM]
      mean iterations_per_second of DIR/metrics.jsonl's train reports from iteration FROM (default 3:
      the first steps warm up) on, and the number of reports averaged.
  nccl_compare.py step DIR
      the step of DIR/training_state.json (0 when there is none yet).
"""
import array
import json
import math
import os
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {t['dtype']}, want F32 (adapters are float32)")
        lo, hi = t["data_offsets"]
        a = array.array("f")
        a.frombytes(data[lo:hi])
        if sys.byteorder != "little":
            a.byteswap()
        out[name] = (t["shape"], a)
    return out


def adapters(path_a, path_b, tol):
    a, b = read_safetensors(path_a), read_safetensors(path_b)
    if sorted(a) != sorted(b):
        print(f"different tensors: {sorted(set(a) ^ set(b))}")
        return 1
    worst_frob, worst_elem, bad = 0.0, 0.0, []
    for name in sorted(a):
        (sa, xa), (sb, xb) = a[name], b[name]
        if sa != sb:
            print(f"{name}: shape {sa} vs {sb}")
            return 1
        diff = math.sqrt(sum((p - q) ** 2 for p, q in zip(xa, xb)))
        norm = math.sqrt(sum(q * q for q in xb)) or 1.0
        peak = max((abs(q) for q in xb), default=0.0) or 1.0
        elem = max((abs(p - q) for p, q in zip(xa, xb)), default=0.0) / peak
        worst_frob, worst_elem = max(worst_frob, diff / norm), max(worst_elem, elem)
        if diff / norm > tol:
            bad.append(f"{name} {diff / norm:.3g}")
    print(f"adapters: {len(a)} tensors, max ‖Δ‖/‖x‖ per tensor {worst_frob:.3g} (tolerance {tol:g}), "
          f"max elementwise |Δ|/max|x| {worst_elem:.3g}")
    if bad:
        print("over tolerance: " + ", ".join(bad))
        return 1
    return 0


def events(d):
    with open(os.path.join(d, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def metrics(dir_a, dir_b):
    a, b = events(dir_a), events(dir_b)
    if len(a) != len(b) or not a:
        print(f"{len(a)} metric events vs {len(b)}")
        return 1
    worst = 0.0
    for x, y in zip(a, b):
        key = ("event", "iteration", "trained_tokens")
        if any(x.get(k) != y.get(k) for k in key):
            print(f"event {x} vs {y}")
            return 1
        lx = x.get("train_loss", 0) + x.get("val_loss", 0)
        ly = y.get("train_loss", 0) + y.get("val_loss", 0)
        worst = max(worst, abs(lx - ly) / (abs(ly) or 1.0))
    print(f"losses: {len(a)} events, max relative difference {worst:.3g}")
    return 0


def speed(d, start=3):
    its = [e["iterations_per_second"] for e in events(d) if e.get("event") == "train" and e["iteration"] >= start]
    if not its:
        print(f"{d}: no train reports from iteration {start}")
        return 1
    print(f"{sum(its) / len(its):.4f} steps/s (mean of {len(its)} reports from iteration {start})")
    return 0


def step(d):
    try:
        with open(os.path.join(d, "training_state.json")) as f:
            print(json.load(f).get("step", 0))
    except (OSError, ValueError):
        print(0)
    return 0


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "adapters":
        sys.exit(adapters(args[0], args[1], float(args[2])))
    if cmd == "metrics":
        sys.exit(metrics(args[0], args[1]))
    if cmd == "speed":
        sys.exit(speed(args[0], int(args[1]) if len(args) > 1 else 3))
    if cmd == "step":
        sys.exit(step(args[0]))
    raise SystemExit(__doc__)
