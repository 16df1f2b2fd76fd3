#!/usr/bin/env bash
# bench/shard-pack.sh: shard-pack and the shard reader, one JSON line per
# measurement, each beside a reference measured in the same run:
#   - pack throughput (M tokens/s) and compression ratio against raw u16, at
#     -j 1 and -j all cores; reference: the zstd CLI (or gzip where zstd is
#     absent) on the same ids as one raw u16 stream, and bpe-encode's own
#     rate when it is on PATH (shard-pack should never be the slower stage);
#   - reader: random windows of T=1024, batches of 32 (time per batch and
#     windows/s, with and without prefetch); reference: CS336 get_batch on
#     the raw u16 ids, mmap'd.
# Input, first found: $SHARD_BENCH_TOKENS (a token stream, may be .gz);
# Gutenberg (60 MB) tokenized here with a 32000 vocabulary learned by
# bpe-learn on its first 20 MB, when bpe-learn, bpe-encode and the shared data
# exist; else a synthetic Zipfian stream of 20M ids over 32000 (say so).
# $SHARD_BENCH_HELPER: a prebuilt bench/shard_bench (else built here).
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
DATA=${LMPIPE_DATA:-$ROOT/../shared/data}
PATH=$BIN:$PATH
W=$(mktemp -d "${TMPDIR:-/tmp}/shard-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
NCPU=$(nproc)
ITERS=${SHARD_BENCH_ITERS:-500}
T=1024
B=32

now() { date +%s.%N; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.2f", n / (b - a) / 1e6 }'; }
size() { wc -c <"$1" | tr -d ' '; }

HELPER=${SHARD_BENCH_HELPER:-}
if [ -z "$HELPER" ]; then
	HELPER=$W/shard_bench
	B_DIR=${LMPIPE_BUILD:-$ROOT/build}
	cc -std=c11 -D_GNU_SOURCE -O2 -march=x86-64-v2 -fopenmp -pthread -I"$ROOT" -I"$ROOT/libcommon" \
		-o "$HELPER" "$ROOT/bench/shard_bench.c" "$B_DIR/libcommon.a" -lzstd -lm
fi

TEXT_MB=60
if [ -n "${SHARD_BENCH_TOKENS:-}" ]; then
	case $SHARD_BENCH_TOKENS in
	*.gz) gzip -dc "$SHARD_BENCH_TOKENS" >"$W/in.tok" ;;
	*) cp "$SHARD_BENCH_TOKENS" "$W/in.tok" ;;
	esac
	INPUT=${SHARD_BENCH_LABEL:-given}
elif command -v bpe-learn >/dev/null && command -v bpe-encode >/dev/null &&
	[ -r "$DATA/corpus/gutenberg_train.txt" ]; then
	head -c 20000000 "$DATA/corpus/gutenberg_train.txt" >"$W/learn.txt"
	head -c $((TEXT_MB * 1000000)) "$DATA/corpus/gutenberg_train.txt" >"$W/text.txt"
	bpe-learn -v 32000 --special '<|endoftext|>' -o "$W/tok.txt" "$W/learn.txt" 2>/dev/null
	ENC_T0=$(now)
	bpe-encode -t "$W/tok.txt" -j "$NCPU" "$W/text.txt" >"$W/in.tok"
	ENC_T1=$(now)
	INPUT="gutenberg ${TEXT_MB} MB, vocab 32000"
else
	"$HELPER" gen 20000000 32000 2000 1 >"$W/in.tok"
	INPUT="synthetic Zipf(1) over 32000 ids, 20M tokens (not real text)"
fi
"$HELPER" raw <"$W/in.tok" >"$W/raw.u16"
RAW=$(size "$W/raw.u16")
N=$((RAW / 2))
if [ -n "${ENC_T0:-}" ]; then
	echo "{\"bench\":\"shard-pack\",\"what\":\"reference: bpe-encode -j $NCPU (the stage before)\",\"input\":\"$INPUT\",\"Mtok_per_s\":$(rate "$N" "$ENC_T0" "$ENC_T1")}"
fi
cat "$W/in.tok" >/dev/null # page cache warm for every run alike

for j in 1 "$NCPU"; do
	rm -f "$W"/p-*.lms "$W"/p.manifest
	t0=$(now)
	shard-pack -o "$W/p" -j "$j" --shard-tokens 10000000 "$W/in.tok"
	t1=$(now)
	PACKED=$(cat "$W"/p-*.lms | wc -c | tr -d ' ')
	echo "{\"bench\":\"shard-pack\",\"what\":\"shard-pack -j $j --level 3\",\"input\":\"$INPUT\",\"tokens\":$N,\"Mtok_per_s\":$(rate "$N" "$t0" "$t1"),\"ratio_vs_raw_u16\":$(awk -v a="$RAW" -v b="$PACKED" 'BEGIN { printf "%.3f", a / b }')}"
	if command -v zstd >/dev/null; then
		t0=$(now)
		zstd -q -3 -T"$j" -c "$W/raw.u16" >"$W/ref.zst"
		t1=$(now)
		REF="zstd -3 -T$j"
		REFSIZE=$(size "$W/ref.zst")
	else
		t0=$(now)
		gzip -1 -c "$W/raw.u16" >"$W/ref.gz"
		t1=$(now)
		REF="gzip -1 (no zstd CLI here; one thread)"
		REFSIZE=$(size "$W/ref.gz")
	fi
	echo "{\"bench\":\"shard-pack\",\"what\":\"reference: $REF on raw u16, one stream\",\"input\":\"$INPUT\",\"Mtok_per_s\":$(rate "$N" "$t0" "$t1"),\"ratio_vs_raw_u16\":$(awk -v a="$RAW" -v b="$REFSIZE" 'BEGIN { printf "%.3f", a / b }')}"
done

t0=$(now)
shard-pack -t "$W"/p-*.lms
t1=$(now)
echo "{\"bench\":\"shard-pack\",\"what\":\"shard-pack -t (verify and decompress all)\",\"Mtok_per_s\":$(rate "$N" "$t0" "$t1")}"

"$HELPER" read "$T" "$B" "$ITERS" "$W/p" "$W/raw.u16"

# The CS336 get_batch itself (numpy memmap, int64 x and y), where numpy is.
if python3 -c 'import numpy' 2>/dev/null; then
	python3 - "$W/raw.u16" "$T" "$B" "$ITERS" <<'PY'
import sys, time, numpy as np
path, T, B, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = np.memmap(path, dtype=np.uint16, mode="r")
rng = np.random.default_rng(1)
def get_batch():
    starts = rng.integers(0, len(data) - T, size=B)
    x = np.stack([data[s:s + T] for s in starts]).astype(np.int64)
    y = np.stack([data[s + 1:s + T + 1] for s in starts]).astype(np.int64)
    return x, y
for _ in range(20):
    get_batch()
t0 = time.perf_counter()
for _ in range(iters):
    get_batch()
dt = (time.perf_counter() - t0) / iters
print('{"bench":"shard-read","what":"reference: CS336 get_batch in numpy (memmap, np.stack, int64)",'
      '"T":%d,"B":%d,"ms_per_batch":%.4f,"windows_per_s":%.0f}' % (T, B, dt * 1e3, B / dt))
PY
fi
