#!/usr/bin/env bash
# gpu_run.sh — issue 24's measurements on the GPU machine, dgtune's mlx engine (MLX-CUDA) and its
# peer transformers + PEFT (bench/peer_hf.py, bf16, sdpa and eager) on the same card in one call,
# plus the go engine on the machine's 16 cores for scale.
#
#   bash bench/gpu_run.sh SCRATCH RESULTS
#
# Needs MLX with CUDA and mlx-c installed under /opt/mlx (not built here: see the README's GPU
# section) and, in SCRATCH/bin, binaries built on a development machine:
#   probe-mlx, train-mlx, eval-mlx   go build -tags mlx (against an MLX CPU build in /opt/mlx)
#   probe-go                         CGO_ENABLED=0 go build
#   mlxeng.test, dg.test             go test -c -tags mlx ./mx/mlxeng and ./model/diffusiongemma
#   train.test, convert.test         the same for ./train and ./convert (parity runs them when present)
# and the checkpoints SCRATCH/{small,bench}-{4,0} and SCRATCH/real-4 (probe mkmodel; the real one
# ~14 GB). Each item runs in its own process under its own timeout; RESULTS/<item>.txt holds its
# command, output and "#rc=… seconds=…"; an item already done (rc 0) is skipped, so the script can
# be re-run after an interruption; RESULTS/all.txt collects every item's JSON and output tail. ITEMS
# picks groups: smoke parity demo bench real peer (default: all); experts (the fused experts kernel against the
# dequant route: its GPU test, then SCRATCH/real-6 — probe mkmodel --preset real --layers 6 — and real-4); kernels (the
# compiled real step with the LoRA kernels, with MLX's composition instead, and with the AdamW kernel, alternating); profile
# (ncu over one compiled step of SCRATCH/real-6, caches warm, one layer's kernels by category); memory (MLX's own reader against
# Go's, compiled and uncompiled peaks at the real geometry, the mlx estimate); and route (the real geometry's
# bf16 step with MLX's quantized kernels, MLXENG_QUANTIZED=kernel, against the engine's
# default). BENCH_DTYPES (default "float32 bfloat16") and GO16=0 (skip the go engine) narrow bench;
# REAL_DTYPES (default "bfloat16 float32") narrows real.
set -u
S=$1; R=$2; B=$S/bin
mkdir -p "$R"
T0=$(date +%s)
ITEMS=${ITEMS:-"smoke parity demo bench real peer"}
want() { case " $ITEMS " in *" $1 "*) return 0;; esac; return 1; }
item() { # item NAME TIMEOUT CMD...
  local n=$1 l=$2; shift 2
  [ -f $R/$n.txt ] && grep -q '^#rc=0' $R/$n.txt && return 0
  local t=$(date +%s.%N)
  { echo "# $*"; timeout --kill-after=10 "$l" "$@" 2>&1; echo "#rc=$? seconds=$(python3 -c "import time;print(round(time.time()-$t,2))")"; } > $R/$n.txt
  echo "[measure +$(( $(date +%s) - T0 ))s] $n: $(tail -1 $R/$n.txt) $(grep -h '^{' $R/$n.txt | tail -1 | cut -c1-220)"
  # One file that holds every item too: the device returns only a few files per call.
  { echo "## $n"; grep -h '^{' $R/$n.txt | tail -1; tail -c 1500 $R/$n.txt; } >> $R/all.txt
}
if want smoke; then
  item probe-help 60 $B/probe-mlx bench --help
  item tiny-forward 120 $B/probe-mlx bench --model demo/base --prompt-len 16 --canvas-len 16 --steps 3 --backend mlx --json
fi
if want parity; then
  # Each of the engine's tests in its own process: a panic or a hang in MLX ends only that test.
  for t in $(cd mx/mlxeng && $B/mlxeng.test -test.list '^Test' | grep -v Distributed); do
    ( cd mx/mlxeng && item parity-mlxeng-$t 200 $B/mlxeng.test -test.count=1 -test.v -test.run "^$t\$" )
  done
  ( cd model/diffusiongemma && item parity-model 300 $B/dg.test -test.count=1 -test.v )
  [ -x $B/train.test ] && ( cd train && item parity-train 300 $B/train.test -test.count=1 -test.v )
  [ -x $B/convert.test ] && ( cd convert && item parity-convert 200 $B/convert.test -test.count=1 -test.v -test.run MLX )
fi
if want demo; then
  item demo-train-mlx 400 $B/train-mlx --config configs/tiny.yaml --backend mlx --adapter-path /tmp/dgs/tiny-mlx --overwrite
  item demo-eval-mlx 300 $B/eval-mlx --config configs/tiny.yaml --backend mlx --adapter /tmp/dgs/tiny-mlx
fi
if want bench; then
  for p in small bench; do
    case $p in small) g="64 64";; bench) g="128 256";; esac; read pl cl <<<"$g"
    for b in 4 0; do
      for dt in ${BENCH_DTYPES:-float32 bfloat16}; do
        item mlx-$p-bits$b-$dt 240 $B/probe-mlx bench --backend mlx --model $S/$p-$b --prompt-len $pl --canvas-len $cl --steps 10 --warmup 2 --compute-dtype $dt --json
      done
      [ "${GO16:-1}" = 0 ] || item go16-$p-bits$b 240 env GOMAXPROCS=16 $B/probe-go bench --model $S/$p-$b --prompt-len $pl --canvas-len $cl --steps 3 --json
    done
  done
fi
if want real; then
  for dt in ${REAL_DTYPES:-bfloat16 float32}; do
    item mlx-real-128x256-$dt 420 $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 128 --canvas-len 256 --steps 5 --warmup 2 --compute-dtype $dt --json
  done
  item mlx-real-2048x256-bf16-ckpt 420 $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 2048 --canvas-len 256 --steps 3 --warmup 1 --compute-dtype bfloat16 --grad-checkpoint --json
  item estimate-real-128x256 60 $B/probe-go estimate --model $S/real-4 --prompt-len 128 --canvas-len 256 --json
  item estimate-real-2048x256-ckpt 60 $B/probe-go estimate --model $S/real-4 --prompt-len 2048 --canvas-len 256 --grad-checkpoint --json
fi
if want knobs; then
  # MLX-CUDA's launch path: CUDA graphs of up to 100 ops on Hopper (MLX_MAX_OPS_PER_BUFFER), or none.
  for p in ${KNOB_PRESETS:-bench small}; do
    case $p in small) g="64 64";; bench) g="128 256";; esac; read pl cl <<<"$g"
    for k in graphs-default:MLX_USE_CUDA_GRAPHS=1 graphs-off:MLX_USE_CUDA_GRAPHS=0 ops-1000:MLX_MAX_OPS_PER_BUFFER=1000 ops-20:MLX_MAX_OPS_PER_BUFFER=20; do
      item mlx-$p-bits4-bfloat16-${k%%:*} 120 env ${k#*:} $B/probe-mlx bench --backend mlx --model $S/$p-4 --prompt-len $pl --canvas-len $cl --steps 10 --warmup 2 --compute-dtype bfloat16 --json
    done
  done
fi
if want compiled; then
  # The compiled step (--compile) against the uncompiled one, at each launch setting, then the
  # real geometry with the best of them. LAUNCH names the real runs' env (default: the engine's).
  for p in bench small; do
    case $p in small) g="64 64";; bench) g="128 256";; esac; read pl cl <<<"$g"
    for k in default:MLX_USE_CUDA_GRAPHS=1 ops-20:MLX_MAX_OPS_PER_BUFFER=20 graphs-off:MLX_USE_CUDA_GRAPHS=0; do
      item mlx-$p-bits4-bfloat16-compiled-${k%%:*} 120 env ${k#*:} $B/probe-mlx bench --backend mlx --model $S/$p-4 --prompt-len $pl --canvas-len $cl --steps 10 --warmup 2 --compute-dtype bfloat16 --compile --json
    done
  done
  for k in ${REAL_LAUNCH:-ops-20:MLX_MAX_OPS_PER_BUFFER=20 graphs-off:MLX_USE_CUDA_GRAPHS=0}; do
    item mlx-real-128x256-bfloat16-compiled-${k%%:*} 300 env ${k#*:} $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 128 --canvas-len 256 --steps 5 --warmup 2 --compute-dtype bfloat16 --compile --json
    item mlx-real-128x256-bfloat16-${k%%:*} 300 env ${k#*:} $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 128 --canvas-len 256 --steps 3 --warmup 1 --compute-dtype bfloat16 --json
  done
  item mlx-real-2048x256-bf16-ckpt-compiled 300 env ${REAL_BEST:-MLX_MAX_OPS_PER_BUFFER=20} $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 2048 --canvas-len 256 --steps 3 --warmup 1 --compute-dtype bfloat16 --grad-checkpoint --compile --json
fi
if want memory; then
  # The weights read by MLX itself against the copy through Go, the compiled step's peak against
  # the uncompiled one's (the dequantize-just-before-the-product fix), and the mlx estimate.
  for v in go mlx; do
    item load-real-$v 180 env MLXENG_LOAD=$v $B/probe-mlx load --backend mlx --model $S/real-4 --compute-dtype bfloat16 --json
  done
  item mlx-real-128x256-bfloat16-compiled 300 $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 128 --canvas-len 256 --steps 3 --warmup 2 --compute-dtype bfloat16 --compile --json
  item mlx-real-128x256-bfloat16 300 $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 128 --canvas-len 256 --steps 3 --warmup 1 --compute-dtype bfloat16 --json
  item estimate-mlx-real-128x256 60 $B/probe-go estimate --model $S/real-4 --prompt-len 128 --canvas-len 256 --backend mlx --compute-dtype bfloat16 --json
  item mlx-real-2048x256-bf16-ckpt-compiled 300 $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 2048 --canvas-len 256 --steps 2 --warmup 1 --compute-dtype bfloat16 --grad-checkpoint --compile --json
  item mlx-real-2048x256-bf16-ckpt 300 $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 2048 --canvas-len 256 --steps 2 --warmup 1 --compute-dtype bfloat16 --grad-checkpoint --json
  item estimate-mlx-real-2048x256-ckpt 60 $B/probe-go estimate --model $S/real-4 --prompt-len 2048 --canvas-len 256 --grad-checkpoint --backend mlx --compute-dtype bfloat16 --json
fi
if want experts; then
  # The fused experts kernel (the default on CUDA, mx/mlxeng/experts.go) against the dequant route: its
  # GPU test first, then the 6-layer and the full real geometry, uncompiled and compiled, each way.
  ( cd mx/mlxeng && item experts-test 300 env MLXENG_EXPERTS=fused $B/mlxeng.test -test.count=1 -test.v -test.run 'FusedExperts|DequantRoute' )
  ( cd mx/mlxeng && item experts-bench 300 $B/mlxeng.test -test.run XXX -test.bench FusedExperts -test.benchtime 20x )
  for m in ${EXPERTS_MODELS:-real-6 real-4}; do
    for v in dequant fused; do
      item experts-$m-$v 300 env MLXENG_EXPERTS=$v $B/probe-mlx bench --backend mlx --model $S/$m --prompt-len 128 --canvas-len 256 --steps 3 --warmup 1 --compute-dtype bfloat16 --json
      item experts-$m-$v-compiled 400 env MLXENG_EXPERTS=$v $B/probe-mlx bench --backend mlx --model $S/$m --prompt-len 128 --canvas-len 256 --steps 3 --warmup 2 --compute-dtype bfloat16 --compile --json
    done
  done
fi
if want profile; then
  # Every kernel of one compiled step timed by Nsight Compute, caches left warm as in the step itself, on the real
  # geometry cut to 6 layers (SCRATCH/real-6: probe mkmodel --preset real --layers 6 --bits 4 --sharded), then
  # summarised with one layer forward and backward split at the fused experts kernel's gate/up launches
  # (bench/ncu_summary.py; session 13: 29.5 ms a step, 4.05 -> 3.50 ms a layer).
  item profile-real6 300 env MLX_USE_CUDA_GRAPHS=0 ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --page raw --log-file $R/ncu-real6.csv $B/probe-mlx bench --backend mlx --model $S/real-6 --prompt-len 128 --canvas-len 256 --steps 1 --warmup 1 --compute-dtype bfloat16 --compile --json
  item profile-real6-summary 60 python3 bench/ncu_summary.py $R/ncu-real6.csv --top 40 --per-layer experts_t_1408,experts_f_2816_1408
fi
if want route; then
  item mlx-real-128x256-bfloat16-kernel 420 env MLXENG_QUANTIZED=kernel $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 128 --canvas-len 256 --steps 3 --warmup 1 --compute-dtype bfloat16 --json
fi
if want kernels; then
  # The engine's own kernels against MLX's ops, alternating on the compiled real step: the LoRA kernels
  # (MLXENG_LORA=mlx is MLX's composition) and the multi-tensor AdamW kernel (MLXENG_ADAM=kernel, off by default).
  for r in 1 2 3; do
    for k in default:MLXENG_LORA= lora-mlx:MLXENG_LORA=mlx adam-kernel:MLXENG_ADAM=kernel; do
      item mlx-real-128x256-bf16-compiled-${k%%:*}-$r 120 env ${k#*:} $B/probe-mlx bench --backend mlx --model $S/real-4 --prompt-len 128 --canvas-len 256 --steps 10 --warmup 2 --compute-dtype bfloat16 --compile --json
    done
  done
fi
if want peer; then
  for attn in ${PEER_REAL_ATTN:-sdpa eager}; do
    item peer-real-128x256-$attn 420 python3 bench/peer_hf.py --model ${REAL_CONFIG:-$S/real-4/config.json} --prompt-len 128 --canvas-len 256 --steps 5 --device cuda --dtype bfloat16 --attn-implementation $attn --json
  done
  for p in ${PEER_PRESETS:-small bench}; do
    case $p in small) g="64 64";; bench) g="128 256";; esac; read pl cl <<<"$g"
    for attn in sdpa eager; do
      item peer-$p-$attn 300 python3 bench/peer_hf.py --model $S/$p-0 --prompt-len $pl --canvas-len $cl --steps 10 --device cuda --dtype bfloat16 --attn-implementation $attn --json
    done
  done
fi
