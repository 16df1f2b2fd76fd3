#!/bin/sh
# bench/overlap.sh: a memory-bound pass (RMSNorm's backward) beside an
# independent weight-gradient product (cuBLASLt's dW of gpt2s's gate/up),
# the GPU's multiprocessors split between them, against the two one after
# the other (bench/overlap_bench.c says what each figure is).  Both forms
# of the pass: the register-fed kernel (LMPIPE_RMSNORM_BULK=0), then the
# bulk-copy one (the default).  Builds build/bench/overlap_bench if it is
# missing (needs build/libkernels.a from a CUDA build).
#   OVERLAP_BLOCKS="12 20" bench/overlap.sh       (the pass's blocks to try)
#   OVERLAP_CANDS=8 bench/overlap.sh              (also each of cuBLASLt's
#                                                  first 8 candidates)
#   SHAPE="32768:768:2304" bench/overlap.sh       (N:C:OUT; default gpt2s's
#                                                  32768:768:4096)
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${LMPIPE_BUILD:-$ROOT/build}
BENCH=$BUILD/bench/overlap_bench
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SHAPE=${SHAPE:-32768:768:4096}

. "$ROOT/bench/lib-cuda.sh"
cuda_bench "$BENCH" "$ROOT/bench/overlap_bench.c" "$BUILD/libkernels.a" -lcublasLt
IFS=: read -r n c out <<-EOS
$SHAPE
EOS
for b in 0 1; do
	LMPIPE_RMSNORM_BULK=$b "$BENCH" "$n" "$c" "$out"
done
