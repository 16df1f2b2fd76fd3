#!/bin/sh
# bench/gemm.sh: lmpipe's own Hopper product (kernels/gemm.h) beside
# cuBLASLt (autotuned, as lm-train runs it) on the training products of the
# ts and gpt2s shapes (rows = 32768 tokens; the LM head at 8192-row chunks),
# one JSON line per implementation, tile width, cluster, epilogue and
# shape, with TFLOP/s and ours / cuBLASLt; every output of ours is checked
# against cuBLASLt's (exit 1 if one differs).  Builds build/bench/gemm_bench
# if it is missing (needs build/libkernels.a from a CUDA build).
#   SHAPES="32768:1536:512" bench/gemm.sh      (M:N:K)
#   CLUSTERS="1 2" bench/gemm.sh               (LMPIPE_GEMM_CLUSTER values)
#   EPIS="tma reg pp" bench/gemm.sh            (LMPIPE_GEMM_EPI values; "swiglu":
#                                               gemm_swiglu_cuda, N = 2 F, against
#                                               cuBLASLt then the SwiGLU pass; "rope":
#                                               gemm_rope_cuda, N = 3 H 64, against
#                                               cuBLASLt then the RoPE pass, rows of
#                                               GEMM_ROPE_T = 1024 tokens; 192 wide
#                                               only: EPIS=rope BNS=192
#                                               SHAPES=32768:2304:768)
#   BNS="128 256" bench/gemm.sh                (tile widths, the default)
#   GEMM_REPS=1 bench/gemm.sh                  (products per timing, default 10 back
#                                               to back; 1: each alone, no overlap)
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${LMPIPE_BUILD:-$ROOT/build}
BENCH=$BUILD/bench/gemm_bench
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SHAPES=${SHAPES:-"32768:1536:512 32768:512:512 32768:2688:512 32768:512:1344 32768:2304:768 32768:768:768 32768:4096:768 32768:768:2048 8192:50304:768"}
CLUSTERS=${CLUSTERS:-"1 2"}
EPIS=${EPIS:-"tma reg"}

. "$ROOT/bench/lib-cuda.sh"
cuda_bench "$BENCH" "$ROOT/bench/gemm_bench.c" "$BUILD/libkernels.a" -lcublasLt
status=0
for s in $SHAPES; do
	IFS=: read -r m n k <<-EOS
	$s
	EOS
	GEMM_CLUSTERS=$CLUSTERS GEMM_EPIS=$EPIS "$BENCH" "$m" "$n" "$k" ${BNS:-} || status=1
done
exit $status
