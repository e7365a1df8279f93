#!/usr/bin/env bash
# nccl_run.sh — issue 29 on a machine of 2 GPUs (nvidia-h200-x2): data-parallel training over MLX's
# NCCL backend, measured against one process. Run from the repository root:
#
#   ITEMS=preflight bash bench/nccl_run.sh SCRATCH RESULTS     # then parity, any, kill, resume, speed
#
# Needs MLX with CUDA *and NCCL* plus mlx-c under /opt/mlx (the offline kit's build.sh finds NCCL in the
# torch venv's wheel: its log says "NCCL 2.x: … (linked, not dlopen'ed)"; preflight checks), and, in
# SCRATCH/bin, binaries built on the development machine (with the CGO flags of MLX's CPU build in
# /opt/mlx; stripped, the three pack into a 23 MB .tar.xz to carry):
#   train-mlx     go build -tags mlx -trimpath -ldflags='-s -w' -o .devbin/nccl/train-mlx ./cmd/train
#   probe-go      CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o .devbin/nccl/probe-go ./cmd/probe
#   mlxeng.test   go test -c -tags mlx -trimpath -ldflags='-s -w' -o .devbin/nccl/mlxeng.test ./mx/mlxeng
#   tar cf - -C .devbin nccl | xz -T2 > .devbin/nccl.tar.xz    # on the device: tar xJf … and SCRATCH/bin = that nccl/
#
# ITEMS picks groups (default: all, in this order; one device call runs at most 600 s, so pass a few at
# a time). Each item runs under its own timeout into RESULTS/<item>.txt ending "#rc=… seconds=…"; an item
# that ended rc 0 is skipped on a re-run; RESULTS/summary.txt collects the lines that answer the issue.
#   preflight  nvidia-smi, NCCL linked into libmlx, MLX's NCCL all_sum between the 2 GPUs (mlxeng.test)
#   parity     the demo (configs/tiny.yaml on the mlx engine), batch 2, PARITY_ITERS steps: one process on
#              one GPU vs --launch 2 --distributed nccl; adapters within TOL (‖Δ‖/‖x‖ per tensor, default
#              1e-3) and the losses; NCCL_DEBUG=INFO shows NVLS off
#   any        --launch 2 without distributed: each rank must pick NCCL (MLX's "any" on a CUDA build)
#   kill       --launch 2 --distributed nccl on the demo; rank 1 SIGKILLed after step 40: the launcher must
#              end within 90 s, rank 0 naming rank 1
#   resume     the killed run resumed by 1 process (+20 steps), then by 2 ranks (+20 more), against one
#              uninterrupted process: the world size changes twice, the adapter within TOL
#   mkmodel    starts writing the real 26B-A4B geometry at 4 bits into SCRATCH/real-4 (~14 GB) detached,
#              so that it outlives this call; speed waits for it
#   speed      the real geometry at 4 bits, prompt 128, canvas 256 (COMPUTE, default bfloat16): one GPU with
#              batch 2 vs 2 GPUs with batch 4 (2 per GPU), SPEED_ITERS steps; steps/s from metrics.jsonl
#              (reports from step 3 on), the share in all_sum from --json
# DIST=ring runs the same items over the ring instead of NCCL: a rehearsal of this script on a machine
# without GPUs (ITEMS="parity any kill resume"), not a result for the issue.
set -u
DIST=${DIST:-nccl}
if [ "${1:-}" = __kill ]; then # the kill item, run by item below: __kill SCRATCH TRAIN
  S=$2; TRAIN=$3; dir=$S/kill
  rm -rf "$dir"
  "$TRAIN" --config configs/tiny.yaml --backend mlx --overwrite --adapter-path "$dir" --launch 2 --distributed "$DIST" \
    --iters 1000000 --batch-size 2 --save-every 20 --steps-per-eval 0 --val-batches 1 --steps-per-report 20 &
  launcher=$!
  for _ in $(seq 300); do [ "$(python3 bench/nccl_compare.py step "$dir")" -ge 40 ] && break; sleep 1; done
  r1=""
  for p in $(pgrep -P $launcher); do tr '\0' '\n' <"/proc/$p/environ" | grep -qx MLX_RANK=1 && r1=$p; done
  if [ -z "$r1" ]; then echo "no rank 1 under launcher $launcher"; kill -9 $launcher; exit 1; fi
  echo "killing rank 1 (pid $r1, SIGKILL) at checkpoint step $(python3 bench/nccl_compare.py step "$dir")"
  t0=$(date +%s.%N)
  kill -9 "$r1"
  ( sleep 150; kill -9 $launcher 2>/dev/null ) & guard=$!
  wait $launcher; rc=$?
  took=$(python3 -c "import time; print(round(time.time() - $t0, 1))")
  kill $guard 2>/dev/null
  for p in $(pgrep -P $launcher); do kill -9 "$p"; done
  verdict=OK; python3 -c "import sys; sys.exit(0 if $took <= 90 else 1)" || verdict="OVER the 90 s bound"
  echo "KILL: the launcher ended rc=$rc ${took}s after rank 1 was killed ($verdict)"
  exit 0
fi

S=$1; R=$2; B=$S/bin; TRAIN=$B/train-mlx
TOL=${TOL:-1e-3}
mkdir -p "$R"
T0=$(date +%s)
ITEMS=${ITEMS:-"preflight parity any kill resume mkmodel speed"}
want() { case " $ITEMS " in *" $1 "*) return 0;; esac; return 1; }
item() { # item NAME TIMEOUT CMD...
  local n=$1 l=$2; shift 2
  [ -f "$R/$n.txt" ] && grep -q '^#rc=0' "$R/$n.txt" && return 0
  local t; t=$(date +%s.%N)
  { echo "# $*"; timeout --kill-after=10 "$l" "$@" 2>&1; echo "#rc=$? seconds=$(python3 -c "import time;print(round(time.time()-$t,2))")"; } >"$R/$n.txt"
  echo "[nccl +$(( $(date +%s) - T0 ))s] $n: $(tail -1 "$R/$n.txt")"
}
say() { echo "$*" | tee -a "$R/summary.txt"; }
DEMO=(--config configs/tiny.yaml --backend mlx --overwrite --batch-size 2 --seed 0 --save-every 0 --steps-per-report 1)

if want preflight; then
  item preflight-gpus 30 nvidia-smi -L
  item preflight-nccl 30 sh -c "ldd /opt/mlx/lib/libmlx.so | grep -i nccl; env | grep -E '^(NCCL|CUDA_VISIBLE)' || true"
  [ -x "$B/mlxeng.test" ] && ( cd mx/mlxeng && item preflight-allsum 300 "$B/mlxeng.test" -test.count=1 -test.v -test.run 'NCCL' )
  say "preflight: $(grep -c '^GPU ' "$R/preflight-gpus.txt") GPUs; libnccl: $(grep -o 'libnccl[^ ]*' "$R/preflight-nccl.txt" | head -1); $(grep -hE -- '^--- (PASS|SKIP|FAIL)' "$R/preflight-allsum.txt" 2>/dev/null | tr '\n' ' ')"
fi
if want parity; then
  it=${PARITY_ITERS:-20}
  item parity-1proc 300 env CUDA_VISIBLE_DEVICES=0 "$TRAIN" "${DEMO[@]}" --iters "$it" --steps-per-eval 10 --adapter-path "$S/parity-1"
  item parity-2gpu 300 env NCCL_DEBUG=INFO "$TRAIN" "${DEMO[@]}" --iters "$it" --steps-per-eval 10 --adapter-path "$S/parity-2" \
    --launch 2 --distributed "$DIST" --json "$S/parity-2/result.json"
  item parity-compare 600 sh -c "python3 bench/nccl_compare.py adapters $S/parity-1/adapters.safetensors $S/parity-2/adapters.safetensors $TOL; \
    python3 bench/nccl_compare.py metrics $S/parity-1 $S/parity-2"
  say "parity ($it steps, batch 2: 1 process vs 2 ranks over $DIST): $(grep -h '^adapters\|^losses\|^over' "$R/parity-compare.txt" | tr '\n' ' ')"
  say "parity: $(grep -h "ranks over MLX's" "$R/parity-2gpu.txt" | head -1); NVLS: $(grep -ho 'NCCL_NVLS_ENABLE set[^.]*' "$R/parity-2gpu.txt" | sort -u | tr '\n' ' ')"
fi
if want any; then
  item any 300 "$TRAIN" "${DEMO[@]}" --iters 5 --adapter-path "$S/any" --launch 2
  say "any: $(grep -h "ranks over MLX's" "$R/any.txt" | head -1)"
fi
if want kill; then
  item kill 420 bash "$0" __kill "$S" "$TRAIN"
  say "$(grep -h '^KILL' "$R/kill.txt")"
  say "kill: rank 0 said: $(grep -h 'rank 0 of 2 stops' "$R/kill.txt" | head -1)"
fi
if want resume; then
  k=$(python3 bench/nccl_compare.py step "$S/kill")
  RES=(--config configs/tiny.yaml --backend mlx --batch-size 2 --seed 0 --save-every 20 --steps-per-eval 0 --val-batches 1 --steps-per-report 20)
  item resume-1proc 300 env CUDA_VISIBLE_DEVICES=0 "$TRAIN" "${RES[@]}" --adapter-path "$S/kill" --resume --iters $((k + 20))
  item resume-2gpu 300 "$TRAIN" "${RES[@]}" --adapter-path "$S/kill" --resume --iters $((k + 40)) --launch 2 --distributed "$DIST"
  item resume-ref 300 env CUDA_VISIBLE_DEVICES=0 "$TRAIN" "${RES[@]}" --adapter-path "$S/resume-ref" --overwrite --iters $((k + 40))
  item resume-compare 600 python3 bench/nccl_compare.py adapters "$S/kill/adapters.safetensors" "$S/resume-ref/adapters.safetensors" "$TOL"
  say "resume from step $k: $(grep -ho 'written by [0-9] rank(s), this run has [0-9]' "$R/resume-1proc.txt" "$R/resume-2gpu.txt" | tr '\n' ';') vs one uninterrupted process to $((k + 40)): $(grep -h '^adapters' "$R/resume-compare.txt")"
fi
if want mkmodel && [ ! -d "$S/real-4" ] && ! pgrep -f "mkmodel --preset real" >/dev/null; then
  rm -rf "$S/real-4.tmp"
  nohup sh -c "'$B/probe-go' mkmodel --preset real --bits 4 --sharded --seed 1 --out '$S/real-4.tmp' && mv '$S/real-4.tmp' '$S/real-4'" >"$R/mkmodel.txt" 2>&1 &
  echo "[nccl] mkmodel started detached (pid $!): $S/real-4 appears when it is done"
fi
if want speed; then
  if [ ! -d "$S/real-4" ]; then
    echo "[nccl] speed: $S/real-4 is not there yet (ITEMS=mkmodel starts it; $(tail -c 300 "$R/mkmodel.txt" 2>/dev/null))"
  else
    if [ ! -f "$S/realdata/train.jsonl" ]; then
      # Rows long enough for any tokenizer to fill prompt 128 and canvas 256: random words of 3–8 letters.
      python3 - "$S/realdata" <<'EOF'
import json, os, random, sys
out = sys.argv[1]; os.makedirs(out, exist_ok=True); rnd = random.Random(29)
words = lambda n: " ".join("".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 8))) for _ in range(n))
for split, rows in (("train", 96), ("valid", 8)):
    with open(os.path.join(out, split + ".jsonl"), "w") as f:
        for _ in range(rows):
            f.write(json.dumps({"prompt": words(600), "completion": words(1200)}) + "\n")
EOF
    fi
    it=${SPEED_ITERS:-15}
    SP=(--model "$S/real-4" --data "$S/realdata" --backend mlx --overwrite --max-prompt 128 --max-canvas 256 --compute-dtype "${COMPUTE:-bfloat16}"
      --iters "$it" --steps-per-report 1 --steps-per-eval 0 --val-batches 1 --save-every 0 --seed 0)
    item speed-dryrun 300 env CUDA_VISIBLE_DEVICES=0 "$TRAIN" "${SP[@]}" --batch-size 2 --adapter-path "$S/speed-dry" --dry-run
    item speed-1gpu 590 env CUDA_VISIBLE_DEVICES=0 "$TRAIN" "${SP[@]}" --batch-size 2 --adapter-path "$S/speed-1" --json "$S/speed-1/result.json"
    item speed-2gpu 590 "$TRAIN" "${SP[@]}" --batch-size 4 --adapter-path "$S/speed-2" --launch 2 --distributed "$DIST" --json "$S/speed-2/result.json"
    one=$(python3 bench/nccl_compare.py speed "$S/speed-1"); two=$(python3 bench/nccl_compare.py speed "$S/speed-2")
    ar=$(python3 -c "import json; d=json.load(open('$S/speed-2/result.json'))['distributed']; print(f\"{d['step_seconds']:.3f} s per step, {d['all_reduce_seconds']:.3f} s in all_sum\")" 2>&1)
    scale=$(awk -v a="${one%% *}" -v b="${two%% *}" 'BEGIN { if (a > 0) printf "%.2f", 2 * b / a; else print "?" }')
    say "speed (real geometry, 4-bit, 128/256, ${COMPUTE:-bfloat16}, batch 2 per GPU): 1 GPU $one; 2 GPUs $two ($ar); examples/s 2 GPUs ÷ 1 GPU = $scale"
  fi
fi
