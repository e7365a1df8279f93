#!/usr/bin/env bash
# avx512_tests.sh — the AVX-512 kernels' tests, on a machine whose CPU has AVX-512F (the GPU
# machine's Xeon), from static test binaries built on another (which need not have it):
#
#   bash bench/avx512_tests.sh build   # here, from the repository root: .devbin-avx512/*.test
#   bash bench/avx512_tests.sh run     # there, from the repository root (with .devbin-avx512/)
#
# The packages are those with AVX-512 code — mx/internal/sgemm (the 12×16 pair, 6×16 ZMM,
# thin and sixteen-row skinny kernels) and mx/internal/quant (the sixteen-row 4-bit decoder)
# — and mx/goeng, whose products go through them. run runs every test of each package, in
# the package's directory (for its testdata), with GOENG_REQUIRE_AVX512=1: a test of an
# AVX-512 path then fails on a CPU without AVX-512F instead of skipping, so a run that
# tested nothing cannot pass. It prints each package's verbose output and exits non-zero
# if any package failed.
set -u
cd "$(dirname "$0")/.."
BIN=.devbin-avx512
PKGS="mx/internal/sgemm mx/internal/quant mx/goeng"

case "${1:-}" in
build)
  mkdir -p "$BIN"
  for p in $PKGS; do
    CGO_ENABLED=0 go test -c -o "$BIN/$(basename "$p").test" "./$p" || exit 1
  done
  ls -l "$BIN"
  ;;
run)
  grep -qw avx512f /proc/cpuinfo 2>/dev/null || echo "avx512_tests: /proc/cpuinfo lists no avx512f; the AVX-512 tests will fail" >&2
  root=$PWD
  rc=0
  for p in $PKGS; do
    t="$root/$BIN/$(basename "$p").test"
    [ -x "$t" ] || { echo "avx512_tests: $t missing: bash bench/avx512_tests.sh build" >&2; exit 2; }
    echo "== $p"
    (cd "$p" && GOENG_REQUIRE_AVX512=1 "$t" -test.v) || rc=1
  done
  echo "avx512_tests: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
  ;;
*)
  echo "usage: bash bench/avx512_tests.sh build|run" >&2
  exit 2
  ;;
esac
