#!/bin/sh
# bench/lm-sample-phases.sh: where a CPU decoding step of lm-sample's
# decoder goes (bench/decode_phases.c: random weights of the model preset,
# no sampling), per thread count and batch: one JSON line each with the
# milliseconds of a whole step and of each phase (model_decode.h).  Needs
# build/libcommon.a and build/libkernels.a (make).  No reference: this is
# the breakdown behind bench/lm-sample-cpu.sh's figures.
#
#   THREADS="16 2" (default: all cores)  BATCHES="1 64"  MODEL=s5m
#   PROMPT=32  NEW=64  ROUNDS=4
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
B_DIR=${LMPIPE_BUILD:-$ROOT/build}
THREADS=${THREADS:-$(nproc)}
BATCHES=${BATCHES:-1 64}
MODEL=${MODEL:-s5m}
PROMPT=${PROMPT:-32}
NEW=${NEW:-64}
ROUNDS=${ROUNDS:-4}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/decode-phases.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -march=x86-64-v2 -fopenmp -pthread ${CFLAGS:-} \
	-I"$ROOT" -I"$ROOT/libcommon" -o "$TMP/decode_phases" "$ROOT/bench/decode_phases.c" \
	"$B_DIR/libcommon.a" "$B_DIR/libkernels.a" ${LDFLAGS:-} -lzstd -ljansson -lopenblas -lm
for n in $THREADS; do
	for b in $BATCHES; do
		OMP_NUM_THREADS=$n "$TMP/decode_phases" "$MODEL" "$b" "$PROMPT" "$NEW" "$ROUNDS"
	done
done
