#!/usr/bin/env bash
# convert_real.sh — issue 30 at a given geometry (the real 26B-A4B on the GPU machine's 16 cores and
# 128 GB; any preset elsewhere): the bf16 release layout written tensor by tensor, `convert --bits 4`
# timed with its peak RSS, then the converted model's first training steps, and one LoRA run from the
# converted checkpoint against the same run with quantize_on_load: 4 from the bf16 one, adapter bytes
# compared.
#
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o .devbin/ ./cmd/probe ./cmd/convert ./cmd/train
#   OUT=/some/dir PHASES="write convert" bash bench/convert_real.sh     # then, on the same machine:
#   OUT=/some/dir PHASES="step" bash bench/convert_real.sh
#
# Knobs: PRESET (real), LAYERS (the preset's), BIN (.devbin), SCRATCH (where the bf16 input goes; the
# real one is ~52 GB, so a disk, not tmpfs), QOUT (the converted output; default /dev/shm/dgtune-q4 when
# /dev/shm has room, else under SCRATCH), PROMPT/CANVAS for the bench step (128/256), TRAIN_ITERS (2).
# Every command's output is appended to $OUT/convert_real.txt; /usr/bin/time -v gives peak RSS.
set -u
OUT=${OUT:?set OUT to the results directory}
PRESET=${PRESET:-real}
BIN=${BIN:-.devbin}
SCRATCH=${SCRATCH:-/tmp/dgtune-convert}
PHASES=${PHASES:-"write convert step"}
PROMPT=${PROMPT:-128}
CANVAS=${CANVAS:-256}
TRAIN_ITERS=${TRAIN_ITERS:-2}
LOG="$OUT/convert_real.txt"
IN="$SCRATCH/$PRESET-bf16"
mkdir -p "$OUT" "$SCRATCH"
if [ -z "${QOUT:-}" ]; then
  QOUT="$SCRATCH/$PRESET-q4"
  if [ "$PRESET" = real ] && [ -d /dev/shm ] && [ "$(df -k --output=avail /dev/shm | tail -1)" -gt 20000000 ]; then
    QOUT=/dev/shm/dgtune-$PRESET-q4
  fi
fi
layers=()
[ -n "${LAYERS:-}" ] && layers=(--layers "$LAYERS")

say() { echo "$*" | tee -a "$LOG"; }
# timed CMD…: runs CMD under /usr/bin/time -v (when present), logging the command, its output and
# the wall time, user/system CPU and peak RSS lines.
timed() {
  say "\$ $*"
  local tf; tf=$(mktemp)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -v -o "$tf" "$@" >>"$LOG" 2>&1; local rc=$?
    grep -E 'Elapsed|Maximum resident|User time|System time' "$tf" | sed 's/^\s*/    /' | tee -a "$LOG"
  else
    local t0; t0=$(date +%s%N); "$@" >>"$LOG" 2>&1; local rc=$?
    say "    elapsed $(( ($(date +%s%N) - t0) / 1000000 )) ms (no /usr/bin/time here: the command's own peak RSS line is above)"
  fi
  rm -f "$tf"; say "    rc=$rc"; return $rc
}
want() { case " $PHASES " in *" $1 "*) return 0 ;; esac; return 1; }

say "# convert_real.sh $(date -u +%FT%TZ) preset=$PRESET ${LAYERS:+layers=$LAYERS} phases='$PHASES' nproc=$(nproc)"
say "# input $IN, converted $QOUT"
df -h "$SCRATCH" /dev/shm 2>/dev/null | sed 's/^/# /' | tee -a "$LOG"

if want write; then
  rm -rf "$IN"
  timed "$BIN/probe" mkmodel --preset "$PRESET" "${layers[@]}" --bits 0 --sharded --hf-layout --seed 1 --out "$IN" || exit 1
  du -sb "$IN" | sed 's/^/# input bytes: /' | tee -a "$LOG"
fi
if want convert; then
  rm -rf "$QOUT"
  timed "$BIN/convert" --model "$IN" --out "$QOUT" --bits 4 || exit 1
  du -sb "$QOUT" | sed 's/^/# output bytes: /' | tee -a "$LOG"
fi
if want step; then
  # The converted model's first training steps, as probe bench times them (one warm-up step).
  timed "$BIN/probe" bench --model "$QOUT" --backend go --prompt-len "$PROMPT" --canvas-len "$CANVAS" --steps 1 --json || true
  # The same LoRA run over the converted checkpoint and over the bf16 one with quantize_on_load: 4.
  data="$SCRATCH/data"
  rm -rf "$data"
  "$BIN/probe" mkdata --task shift --seed 2 --train 64 --out "$data" >>"$LOG" 2>&1 || exit 1
  for run in converted onload; do
    model=$QOUT; extra=()
    [ $run = onload ] && { model=$IN; extra=(--quantize-on-load 4); }
    timed "$BIN/train" --model "$model" "${extra[@]}" --data "$data" --adapter-path "$SCRATCH/adapter-$run" --overwrite \
      --backend go --iters "$TRAIN_ITERS" --batch-size 1 --steps-per-report 1 --steps-per-eval 1000 --val-batches 1 \
      --save-every 1000 --seed 0 --max-canvas 16 || true
  done
  sha256sum "$SCRATCH"/adapter-*/adapters.safetensors 2>&1 | sed 's/^/# /' | tee -a "$LOG"
  if cmp -s "$SCRATCH/adapter-converted/adapters.safetensors" "$SCRATCH/adapter-onload/adapters.safetensors"; then
    say "# adapters: identical"
  else
    say "# adapters: DIFFER"
  fi
fi
