#!/bin/sh
# bench/lm-train-cpu.sh: training tokens/s of lm-train on the CPU beside
# PyTorch eager (bench/torch_llama_cpu.py: the same model and step) on the
# same machine in the same run, with equal thread counts.  One JSON line per
# measurement, then one with the ratio.
#
#   THREADS="16 2"  thread counts (default: all cores)
#   MODEL=s5m       the lm-train preset (d=256, L=4, H=8, T=256, V=4096, d_ff=688)
#   BATCH=16 STEPS=8 (timed steps; 2 more are warm-up)
#   PYTHON=python3  (the PyTorch reference is skipped when it has no torch)
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
THREADS=${THREADS:-$(nproc)}
MODEL=${MODEL:-s5m}
BATCH=${BATCH:-16}
STEPS=${STEPS:-8}
PYTHON=${PYTHON:-python3}
WARMUP=2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lm-train-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

perl "$ROOT/tests/mktext.pl" 20000 3 | perl "$ROOT/tests/bytes2tok.pl" > "$TMP/t.tok"
"$BIN/shard-pack" -o "$TMP/d" < "$TMP/t.tok"
set -- $("$BIN/lm-train" --list-models | awk -v m="$MODEL" '$1 == m { print $2, $3, $4, $5, $6, $7 }')
V=$1 T=$2 D=$3 L=$4 H=$5 F=$6
HAVE_TORCH=1
"$PYTHON" -c 'import torch' 2>/dev/null || HAVE_TORCH=0

for n in $THREADS; do
	"$BIN/lm-train" -m "$MODEL" -b "$BATCH" -n $((STEPS + WARMUP)) -d "$TMP/d" -j "$n" \
		--log "$TMP/log.jsonl"
	ours=$(sed -n 's/.*"tokens_per_s":\([0-9.]*\).*/\1/p' "$TMP/log.jsonl" | tail -n +$((WARMUP + 1)) |
		sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	echo "{\"impl\":\"lm-train\",\"model\":\"$MODEL\",\"batch\":$BATCH,\"context\":$T,\"threads\":$n,\"tokens_per_s\":$ours}"
	[ "$HAVE_TORCH" = 1 ] || { echo "{\"impl\":\"pytorch-eager\",\"skipped\":\"no torch\"}"; continue; }
	ref=$("$PYTHON" "$ROOT/bench/torch_llama_cpu.py" "$V" "$T" "$D" "$L" "$H" "$F" "$BATCH" "$STEPS" "$n")
	echo "$ref"
	theirs=$(echo "$ref" | sed -n 's/.*"tokens_per_s": \([0-9.]*\).*/\1/p')
	echo "{\"threads\":$n,\"ratio_lm_train_over_pytorch\":$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')}"
done
