#!/bin/sh
# bench/attention.sh: the CUDA attention kernels beside PyTorch SDPA (flash
# backend, bf16) on the same shapes in the same run.  Builds
# build/bench/attention_bench if it is missing (needs build/libkernels.a
# from a CUDA build), then prints one JSON line per shape and
# implementation, and lines with the ratios lmpipe / sdpa (flash backend,
# the reference) and lmpipe / sdpa_cudnn (cuDNN backend, when present).
#   SHAPES="64:1024:1 128:4096:1" bench/attention.sh   (D:T:CAUSAL)
#   VARIANT=wgmma bench/attention.sh   a kernel variant the default build
#     leaves out (wgmma or mma, kernels/cuda/variants/) instead of the default:
#     builds BUILD/libattn_variants.a (make attention-variants) if missing
#   ATTN_DETERMINISTIC=1 bench/attention.sh   the backward of lm-train
#     --deterministic (a fixed-order dq) instead of the default one
#   ATTN_PACKED=1 SHAPES="64:1024:1" bench/attention.sh   lm-train's path on
#     the packed q/k/v rows, with its RoPE table and the steps around the
#     kernels (causal shapes only), checked against the default kernels
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${LMPIPE_BUILD:-$ROOT/build}
VARIANT=${VARIANT:-}
BENCH=$BUILD/bench/attention_bench${VARIANT:+_variants}
SHAPES=${SHAPES:-"64:1024:1 64:4096:1 64:16384:1 128:1024:1 128:4096:1 128:16384:1"}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PYTHON=${PYTHON:-python3}

. "$ROOT/bench/lib-cuda.sh"
set -- "$BUILD/libkernels.a"
if [ ! -x "$BENCH" ] && [ -n "$VARIANT" ]; then
	[ -f "$BUILD/libattn_variants.a" ] || make -C "$ROOT" B="$BUILD" attention-variants >&2
	set -- -DATTN_VARIANTS "$BUILD/libattn_variants.a" "$@"
fi
cuda_bench "$BENCH" "$ROOT/bench/attention_bench.c" "$@"
export ATTN_VARIANT="$VARIANT"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/attn-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
status=0
for s in $SHAPES; do
	IFS=: read -r d t c <<-EOS
	$s
	EOS
	"$BENCH" "$d" "$t" "$c" > "$TMP/one" || status=1
	cat "$TMP/one"
	cat "$TMP/one" >> "$TMP/ours"
done
"$PYTHON" "$ROOT/bench/attention_sdpa.py" $SHAPES | tee "$TMP/sdpa"
"$PYTHON" - "$TMP/ours" "$TMP/sdpa" <<'EOPY'
import json, sys
key = lambda r: (r["d"], r["T"], r["causal"])
ours = {key(r): r for r in map(json.loads, open(sys.argv[1]))}
for r in map(json.loads, open(sys.argv[2])):
    o = ours.get(key(r)) if "error" not in r else None
    if o:
        print(json.dumps({"ratio": o["impl"] + "/" + r["impl"], "d": r["d"], "T": r["T"],
                          "causal": r["causal"],
                          "fwd": round(o["fwd_tflops"] / r["fwd_tflops"], 3),
                          "bwd": round(o["bwd_tflops"] / r["bwd_tflops"], 3),
                          "valid": o["valid"]}))
EOPY
exit $status
