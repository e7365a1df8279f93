#!/usr/bin/env bash
# device_run.sh — issue 14's measurements on a big CPU machine (the GPU machine's 16 Xeon cores):
# dgtune's `probe bench` against transformers + PEFT (bench/peer_hf.py) on the same geometry, at 2
# and 16 threads, with a 4-bit and an unquantized base; the real 26B-A4B geometry at 4 bits; and
# grad_checkpoint's peak RSS against `probe estimate`.
#
# Run from the repository root with a prebuilt static probe in .devbin/ (ignored by git):
#
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o .devbin/probe ./cmd/probe
#   OUT=/some/dir bash bench/device_run.sh
#
# Every measurement is independent (its own process, its own timeout) and appends one JSON line to
# $OUT/results.jsonl: {"item", "seconds", "rc", "result" (the command's JSON) or "error" (the tail
# of its stderr)}. Item "env" records the machine and versions. Models go to $SCRATCH (default a
# fresh directory under /tmp; the real checkpoint is ~14.2 GB), never to $OUT. Environment knobs:
#   ITEMS   which groups to run, default "env small bench hf real ckpt"
#   THREADS thread counts for the small/bench groups, default "2 16"
#   STEPS   timed steps for small/bench, default 3 (real times one step after one warm-up;
#           ckpt one step without warm-up, for its peak RSS)
#   NAME    prefix of the probe items' names, default dgtune (to run another build side by
#           side: PROBE=.devbin/probe-old NAME=dgtune-old ITEMS="small bench")
# Expected duration on 16 Xeon cores: ~7 minutes (real-geometry checkpoint ~1–2 min of it).
set -u
OUT=${OUT:?set OUT to the results directory}
mkdir -p "$OUT"
RES="$OUT/results.jsonl"
PROBE=${PROBE:-.devbin/probe}
SCRATCH=${SCRATCH:-$(mktemp -d /tmp/dgtune-dev.XXXXXX)}
ITEMS=${ITEMS:-"env small bench hf real ckpt"}
THREADS=${THREADS:-"2 16"}
STEPS=${STEPS:-3}
NAME=${NAME:-dgtune} # prefix of the probe items' names (another build: PROBE=… NAME=…)
PY=${PY:-python3}
[ -x "$PROBE" ] || { echo "device_run: $PROBE missing: CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o .devbin/probe ./cmd/probe" >&2; exit 2; }
mkdir -p "$SCRATCH"
echo "device_run: results $RES, scratch $SCRATCH" >&2

want() { case " $ITEMS " in *" $1 "*) return 0 ;; esac; return 1; }

# pinargs N: the taskset prefix that keeps a run on cores 0..N-1 (empty without taskset or
# when N covers the machine), so both peers get the same cores.
pinargs() {
	if command -v taskset >/dev/null && [ "$1" -lt "$(nproc)" ]; then
		echo "taskset -c 0-$(($1 - 1))"
	fi
}

# item NAME TIMEOUT CMD...: run CMD under timeout, append its JSON line.
item() {
	local name=$1 limit=$2
	shift 2
	local out err t0 t1 rc
	out=$(mktemp) err=$(mktemp)
	t0=$(date +%s.%N)
	timeout --kill-after=10 "$limit" "$@" >"$out" 2>"$err"
	rc=$?
	t1=$(date +%s.%N)
	"$PY" - "$name" "$rc" "$t0" "$t1" "$out" "$err" "$*" >>"$RES" <<'EOF'
import json, sys
name, rc, t0, t1, out, err, cmd = sys.argv[1:]
line = {"item": name, "rc": int(rc), "seconds": round(float(t1) - float(t0), 2), "cmd": cmd[:300]}
text = open(out).read().strip().splitlines()
res = None
for l in reversed(text):
    try:
        res = json.loads(l)
        break
    except ValueError:
        pass
if res is not None and int(rc) == 0:
    line["result"] = res
else:
    line["error"] = (open(err).read()[-1500:] + "\n" + "\n".join(text[-5:]))[-2000:]
    if int(rc) in (124, 137):
        line["error"] = "timed out after %s s\n" % cmd.split()[0] + line["error"]
print(json.dumps(line))
EOF
	echo "device_run: $name rc=$rc $(tail -c 300 "$RES" | tail -1 | cut -c1-200)" >&2
	rm -f "$out" "$err"
}

if want env; then
	item env 60 "$PY" -c '
import json, os, platform, subprocess
info = {"nproc": os.cpu_count(), "platform": platform.platform()}
try:
    info["cpu"] = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
    info["mem_total_kb"] = int([l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")][0])
    flags = [l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")][0]
    info["simd"] = sorted(f for f in flags if f.startswith(("avx", "fma", "amx")))
except Exception as e:
    info["cpu_error"] = repr(e)
for mod in ("torch", "transformers", "peft"):
    try:
        info[mod] = __import__(mod).__version__
    except Exception as e:
        info[mod] = "missing: %r" % e
try:
    info["git"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
except Exception:
    pass
print(json.dumps(info))'
fi

# Synthetic checkpoints: seconds each for small and bench.
for preset in small bench; do
	want "$preset" || want hf || continue
	for bits in 4 0; do
		[ -d "$SCRATCH/$preset-$bits" ] && continue
		"$PROBE" mkmodel --preset "$preset" --bits "$bits" --seed 1 --out "$SCRATCH/$preset-$bits" >/dev/null 2>&1 ||
			echo "device_run: mkmodel $preset $bits failed" >&2
	done
done

geom() { case $1 in small) echo "64 64" ;; bench) echo "128 256" ;; esac; }

for preset in small bench; do
	want "$preset" || continue
	read -r pl cl <<<"$(geom $preset)"
	for t in $THREADS; do
		for bits in 4 0; do
			item "$NAME/$preset/${pl}x${cl}/bits$bits/threads$t" 240 \
				env GOMAXPROCS="$t" $(pinargs "$t") "$PROBE" bench --model "$SCRATCH/$preset-$bits" \
				--prompt-len "$pl" --canvas-len "$cl" --steps "$STEPS" --json
		done
	done
done

if want hf; then
	for preset in small bench; do
		read -r pl cl <<<"$(geom $preset)"
		for t in $THREADS; do
			item "hf/$preset/${pl}x${cl}/f32/threads$t" 300 \
				env OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t" $(pinargs "$t") "$PY" bench/peer_hf.py --model "$SCRATCH/$preset-0" \
				--prompt-len "$pl" --canvas-len "$cl" --steps "$STEPS" --threads "$t" --json
		done
	done
fi

REAL=$SCRATCH/real-4
if want real || want ckpt; then
	if [ ! -f "$REAL/model.safetensors.index.json" ]; then
		item "mkmodel/real/bits4" 420 "$PY" -c '
import json, subprocess, sys, time, os
t0 = time.time()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
if p.returncode:
    sys.stderr.write(p.stderr); sys.exit(p.returncode)
out = sys.argv[-1]
size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
print(json.dumps({"seconds": round(time.time() - t0, 1), "disk_bytes": size, "stdout": p.stdout.strip().splitlines()[-1]}))' \
			"$PROBE" mkmodel --preset real --bits 4 --sharded --seed 1 --out "$REAL"
	fi
fi

if want real; then
	# One warm-up step first: the timed step is a training step in steady state (the first
	# one also faults the 14 GB of mapped weights in and grows the heap, ~6 s more).
	item "dgtune/real/128x256/bits4/threads16" 420 env GOMAXPROCS=16 "$PROBE" bench --model "$REAL" \
		--prompt-len 128 --canvas-len 256 --steps 1 --warmup 1 --json
	item "estimate/real/128x256/bits4" 60 "$PROBE" estimate --model "$REAL" --prompt-len 128 --canvas-len 256 --json
fi

if want ckpt; then
	item "dgtune/real/512x256/bits4/threads16/grad_checkpoint" 480 env GOMAXPROCS=16 "$PROBE" bench --model "$REAL" \
		--prompt-len 512 --canvas-len 256 --steps 1 --warmup 0 --grad-checkpoint --json
	item "estimate/real/512x256/bits4/grad_checkpoint" 60 "$PROBE" estimate --model "$REAL" --prompt-len 512 --canvas-len 256 \
		--grad-checkpoint --json
fi

echo "device_run: done; $(wc -l <"$RES") lines in $RES" >&2
