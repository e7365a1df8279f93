#!/usr/bin/env bash
# perf_ab.sh — issue 28's same-run A/B on the GPU machine's 16 CPU cores: several builds of
# `probe bench` against transformers + PEFT (bench/peer_hf.py) in both peer configurations
# (eager attention with grouped_mm experts; sdpa with transformers' default experts), on the
# small (64/64) and bench (128/256) presets at 2 threads (pinned to cores 0-1) and 16, 4-bit and
# float32, in alternating rounds; then the FMA peak of two cores, BenchmarkExpertsColdB, the real
# 26B-A4B geometry (4-bit, 128/256, 16 threads) and CPU profiles of a 2-thread bench step.
#
#   bash bench/perf_ab.sh BINDIR OUT
#
# BINDIR holds probe-<name> for every name in NAMES (default "main new": static builds,
# CGO_ENABLED=0), and sgemm.test (go test -c ./mx/internal/sgemm) when the peak is wanted. The
# peers are started once, in the background, each with --rounds/--sync (they stay warm between
# rounds and time one round when told to), so a round costs their timed steps only, not a torch
# import and a model build; every dgtune item is its own process. Items append JSON lines to
# OUT/results.jsonl ({"item", "round", "rc", "seconds", "result" or "error"}); OUT/summary.txt has
# the medians and ratios (bench/perf_summary.py). Knobs: ROUNDS (at least this many, default 3),
# MAXROUNDS (default 5), DEADLINE (no round starts after this many seconds, default 250), HARD (the
# script stops everything after this many seconds, default 380), STEPS (timed steps, default 3),
# PY, PEER, CELLS (default "bench2 small2 bench16 small16"), REAL (names timed on the real
# geometry, default "new main"; empty to skip).
#
# A difference of a few per cent is below these hosts' noise (the medians of two builds running the
# same code differed by 4 % in session 23 and by up to 8 % in session 24's five-round A/A run): add an
# A/A control, the base build copied under a third name (NAMES="main new main2"), and believe only a
# difference that beats main against main2.
set -u
B=$1
OUT=$2
mkdir -p "$OUT"
RES=$OUT/results.jsonl
NAMES=${NAMES:-"main new"}
ROUNDS=${ROUNDS:-3}
MAXROUNDS=${MAXROUNDS:-5}
DEADLINE=${DEADLINE:-250}
HARD=${HARD:-380}
STEPS=${STEPS:-3}
PY=${PY:-python3}
PEER=${PEER:-bench/peer_hf.py}
CELLS=${CELLS:-"bench2 small2 bench16 small16"}
REAL=${REAL-"new main"}
HERE=$(cd "$(dirname "$0")" && pwd)
S=$(mktemp -d /tmp/perfab.XXXXXX)
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
log() { echo "[$(el)s] $*" >&2; }
left() { echo $((HARD - $(el))); }

# record ITEM ROUND RC SECONDS FILE: the last JSON line of FILE (or its tail as the error).
record() {
	"$PY" - "$@" >>"$RES" <<'EOF'
import json, sys
item, rnd, rc, secs, path = sys.argv[1:]
text = open(path, errors="replace").read().strip().splitlines()
line = {"item": item, "round": int(rnd), "rc": int(rc), "seconds": float(secs)}
for l in reversed(text):
    try:
        line["result"] = json.loads(l)
        break
    except ValueError:
        pass
if int(rc) != 0 or "result" not in line:
    line.pop("result", None)
    line["error"] = "\n".join(text[-8:])[-1500:]
print(json.dumps(line))
EOF
}

# run ITEM ROUND LIMIT CMD...: CMD under timeout (never past HARD), its JSON line recorded.
run() {
	local item=$1 rnd=$2 limit=$3
	shift 3
	limit=$((limit < $(left) ? limit : $(left)))
	[ "$limit" -gt 0 ] || return 1
	local t0 t1 rc
	t0=$(date +%s.%N)
	timeout --kill-after=5 "$limit" "$@" >"$S/out" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	record "$item" "$rnd" "$rc" "$(awk "BEGIN{print $t1 - $t0}")" "$S/out"
	log "$item round $rnd rc=$rc $(tail -1 "$RES" | cut -c1-160)"
}

geom() { case $1 in small*) echo "small 64 64" ;; bench*) echo "bench 128 256" ;; esac; }
threads() { case $1 in *16) echo 16 ;; *2) echo 2 ;; esac; }
pin() { [ "$1" -lt "$(nproc)" ] && echo "taskset -c 0-$(($1 - 1))"; }

"$PY" -c '
import json, os, platform
info = {"item": "env", "nproc": os.cpu_count(), "platform": platform.platform()}
info["cpu"] = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
for l in open("/proc/cpuinfo"):
    if l.startswith(("cache size", "cpu MHz")):
        info[l.split(":")[0].strip()] = l.split(":", 1)[1].strip()
for m in ("torch", "transformers", "peft"):
    try:
        info[m] = __import__(m).__version__
    except Exception as e:
        info[m] = repr(e)
print(json.dumps(info))' >>"$RES" 2>&1
lscpu >"$S/lscpu" 2>&1 && grep -iE 'cache|model name|mhz' "$S/lscpu" >&2

# The FMA peak of two cores and of all, and the cold-weight expert products with and without
# prefetching, before anything else runs.
if [ -x "$B/sgemm.test" ]; then
	{
		echo "# GOMAXPROCS=2 taskset -c 0-1"
		GOMAXPROCS=2 taskset -c 0-1 timeout 60 "$B/sgemm.test" -test.run XXX -test.bench 'FMAPeak|ExpertsColdB' -test.benchtime 60x -test.count 3
		echo "# GOMAXPROCS=16"
		GOMAXPROCS=16 timeout 30 "$B/sgemm.test" -test.run XXX -test.bench 'FMAPeak' -test.benchtime 60x -test.count 2
	} >"$OUT/sgemm.txt" 2>&1
	log "sgemm benchmarks: $(grep -c Benchmark "$OUT/sgemm.txt") lines"
fi

first=$(echo $NAMES | awk '{print $NF}')
for preset in small bench; do
	for bits in 4 0; do
		"$B/probe-$first" mkmodel --preset $preset --bits $bits --seed 1 --out "$S/$preset-$bits" >/dev/null 2>&1 ||
			log "mkmodel $preset $bits failed"
	done
done

# The peers: one warm process per cell and configuration.
declare -A PEERDIR
PIDS=""
for cell in $CELLS; do
	read -r preset pl cl <<<"$(geom $cell)"
	t=$(threads $cell)
	for cfg in eager sdpa; do
		d=$S/peer-$cell-$cfg
		mkdir -p "$d"
		extra="--attn-implementation eager --experts-implementation grouped_mm"
		[ $cfg = sdpa ] && extra="--attn-implementation sdpa"
		env OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t $(pin $t) "$PY" "$PEER" --model "$S/$preset-0" --prompt-len $pl --canvas-len $cl \
			--steps $STEPS --threads $t --json --rounds $MAXROUNDS --sync "$d" $extra >"$d/out" 2>"$d/err" &
		PIDS="$PIDS $!"
		PEERDIR[$cell-$cfg]=$d
	done
done
trap 'for p in $PIDS; do kill $p 2>/dev/null; done' EXIT

# The real geometry's checkpoint while the peers warm up (nothing is timed meanwhile).
if [ -n "$REAL" ]; then
	"$B/probe-$first" mkmodel --preset real --bits 4 --sharded --seed 1 --out "$S/real-4" >"$S/mkreal" 2>&1 || log "mkmodel real failed: $(tail -2 "$S/mkreal")"
	log "real checkpoint made"
fi
for k in "${!PEERDIR[@]}"; do
	d=${PEERDIR[$k]}
	while [ ! -f "$d/ready" ] && [ "$(el)" -lt 170 ] && [ "$(left)" -gt 20 ]; do sleep 0.5; done
	[ -f "$d/ready" ] || log "peer $k not ready: $(tail -3 "$d/err")"
done
log "peers ready"

# peer CELL CFG ROUND: one timed round of a warm peer.
peer() {
	local d=${PEERDIR[$1-$2]} r=$3 t0
	[ -f "$d/ready" ] || return
	t0=$(date +%s)
	touch "$d/go.$r"
	while [ ! -f "$d/done.$r" ] && [ $(($(date +%s) - t0)) -lt 120 ] && [ "$(left)" -gt 0 ]; do sleep 0.05; done
	local rc=0
	[ -f "$d/done.$r" ] || rc=124
	grep '^{' "$d/out" | sed -n "${r}p" >"$S/pout"
	[ -s "$S/pout" ] || tail -5 "$d/err" >"$S/pout"
	record "hf-$2/$1" "$r" "$rc" "$(($(date +%s) - t0))" "$S/pout"
	log "hf-$2/$1 round $r $(tail -1 "$RES" | cut -c1-160)"
}

# round R: every cell, dgtune builds (order rotated each round) and both peers.
round() {
	local r=$1 names
	names=$(echo $NAMES | awk -v r=$r '{n=NF; for (i=0;i<n;i++) printf "%s ", $((i+r)%n+1)}')
	for cell in $CELLS; do
		read -r preset pl cl <<<"$(geom $cell)"
		t=$(threads $cell)
		for name in $names; do
			for bits in 4 0; do
				run "$name/$cell/bits$bits" $r 120 env GOMAXPROCS=$t $(pin $t) "$B/probe-$name" bench --model "$S/$preset-$bits" \
					--prompt-len $pl --canvas-len $cl --steps $STEPS --json
			done
		done
		for cfg in eager sdpa; do peer $cell $cfg $r; done
	done
}

r=1
while [ $r -le $ROUNDS ] && [ "$(left)" -gt 30 ]; do round $r; r=$((r + 1)); done

for name in $REAL; do
	[ -d "$S/real-4" ] || break
	run "$name/real/128x256/bits4/threads16" 0 150 env GOMAXPROCS=16 "$B/probe-$name" bench --model "$S/real-4" \
		--prompt-len 128 --canvas-len 256 --steps 1 --warmup 1 --json
done
for bits in 4 0; do
	run "$first/bench2/bits$bits/cpuprofile" 0 60 env GOMAXPROCS=2 taskset -c 0-1 "$B/probe-$first" bench --model "$S/bench-$bits" \
		--prompt-len 128 --canvas-len 256 --steps 5 --json --cpuprofile "$OUT/bench2-bits$bits.prof"
done

while [ $r -le $MAXROUNDS ] && [ "$(el)" -lt "$DEADLINE" ]; do round $r; r=$((r + 1)); done

"$PY" "$HERE/perf_summary.py" "$RES" "$OUT/sgemm.txt" >"$OUT/summary.txt" 2>&1
log "done: $(wc -l <"$RES") lines"
