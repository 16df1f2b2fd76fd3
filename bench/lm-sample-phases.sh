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
#   DEVICE=cuda     the decoder's calls on the GPU instead of the CPU's
#                   phases (see decode_phases.c); MODEL=ts suits it
#   DECODE_PHASES=PROGRAM   a decode_phases built before (a machine
#                   without the headers it needs), instead of compiling
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
B_DIR=${LMPIPE_BUILD:-$ROOT/build}
THREADS=${THREADS:-$(nproc)}
BATCHES=${BATCHES:-1 64}
MODEL=${MODEL:-s5m}
PROMPT=${PROMPT:-32}
NEW=${NEW:-64}
ROUNDS=${ROUNDS:-4}
DEVICE=${DEVICE:-cpu}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/decode-phases.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PROG=${DECODE_PHASES:-}
if [ -z "$PROG" ]; then
	PROG=$TMP/decode_phases
	CUDA_LIBS=
	[ "$DEVICE" = cpu ] || CUDA_LIBS="-L${CUDA_HOME:-/usr/local/cuda}/lib64 -lcublasLt -lcublas -lnccl -lcudart -lstdc++"
	${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -march=x86-64-v2 -fopenmp -pthread ${CFLAGS:-} \
		-I"$ROOT" -I"$ROOT/libcommon" -o "$PROG" "$ROOT/bench/decode_phases.c" \
		"$B_DIR/libcommon.a" "$B_DIR/libkernels.a" ${LDFLAGS:-} -lzstd -ljansson -lopenblas \
		$CUDA_LIBS -lm
fi
for n in $THREADS; do
	for b in $BATCHES; do
		OMP_NUM_THREADS=$n "$PROG" "$MODEL" "$b" "$PROMPT" "$NEW" "$ROUNDS" "$DEVICE"
	done
done
