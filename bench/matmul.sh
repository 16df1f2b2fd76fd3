#!/bin/sh
# bench/matmul.sh: cuBLASLt's three products of the linear layer (kernels/
# matmul.h, autotuned as lm-train runs them) timed one by one on the
# training shapes of ts and gpt2s (32768 tokens; the LM head at 8192-row
# chunks): the forward product, the forward with an fp32 addend (the
# residual branch), the weight gradient alone and the whole backward, one
# JSON line each with milliseconds and TFLOP/s (bench/matmul_bench.c).
# Builds build/bench/matmul_bench if it is missing (needs
# build/libkernels.a from a CUDA build).
#   SHAPES="32768:768:4096" bench/matmul.sh      (N:IN:OUT)
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${LMPIPE_BUILD:-$ROOT/build}
BENCH=$BUILD/bench/matmul_bench
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SHAPES=${SHAPES:-"32768:512:1536 32768:512:512 32768:512:2688 32768:1344:512 32768:768:2304 32768:768:768 32768:768:4096 32768:2048:768 8192:768:50304"}

. "$ROOT/bench/lib-cuda.sh"
cuda_bench "$BENCH" "$ROOT/bench/matmul_bench.c" "$BUILD/libkernels.a" -lcublasLt
for s in $SHAPES; do
	IFS=: read -r n i o <<-EOS
	$s
	EOS
	"$BENCH" "$n" "$i" "$o"
done
