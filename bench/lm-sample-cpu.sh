#!/bin/sh
# bench/lm-sample-cpu.sh: generation tokens/s of lm-sample on the CPU beside
# Hugging Face transformers generate() (bench/hf_generate_cpu.py) on the
# same checkpoint, exported with lm-train --export-hf, on the same machine
# in the same run, with equal thread counts.  Greedy decoding of ROUNDS
# batches of BATCH prompts of PROMPT tokens, one batch after another, NEW
# tokens each, no early stop.  Both sides are timed twice, with NEW and
# with 1 new token (best of REPEAT for lm-sample, of 3 for generate()), and
# the figure is ROUNDS x BATCH x (NEW - 1) / (t_NEW - t_1): decoding speed,
# without loading and prefill.  One JSON line per measurement (with the
# OpenMP and lm-sample variables in force), then the ratio.
#
#   THREADS="16 2"  thread counts (default: all cores)
#   BATCHES="1 64"  MODEL=s5m  PROMPT=32  NEW=64
#   ROUNDS1=16      rounds at batch 1, ROUNDS=4 at other batches (one
#                   round of 63 steps is too short to time on a noisy
#                   machine: process start-up varies by tens of ms)
#   REPEAT=5        lm-sample runs per timing (the least counts)
#   WAIT="active passive"  OMP_WAIT_POLICY values to run lm-sample with
#   REF=1           0: no generate() reference (for sweeps in one run)
#   KEEP=DIR        keep the checkpoint in DIR and reuse it on later calls
#   PYTHON=python3  (the reference is skipped when it has no torch/transformers)
# OMP_PROC_BIND, OMP_PLACES and LMPIPE_DECODE_WORK pass through to lm-sample.
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
THREADS=${THREADS:-$(nproc)}
BATCHES=${BATCHES:-1 64}
MODEL=${MODEL:-s5m}
PROMPT=${PROMPT:-32}
NEW=${NEW:-64}
PYTHON=${PYTHON:-python3}
WAIT=${WAIT:-active passive}
ROUNDS1=${ROUNDS1:-16}
ROUNDS=${ROUNDS:-4}
REPEAT=${REPEAT:-5}
REF=${REF:-1}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lm-sample-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
CK=${KEEP:-$TMP}
mkdir -p "$CK"

# a byte-level tokenizer (256 tokens; the model's vocabulary may be larger)
perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > "$TMP/byte.tok"
if [ ! -e "$CK/ck/latest" ]; then
	perl "$ROOT/tests/mktext.pl" 2000 3 | perl "$ROOT/tests/bytes2tok.pl" > "$TMP/t.tok"
	"$BIN/shard-pack" -o "$TMP/d" < "$TMP/t.tok"
	"$BIN/lm-train" -m "$MODEL" -b 2 -n 2 -d "$TMP/d" -o "$CK/ck" 2>/dev/null
	"$BIN/lm-train" -c "$CK/ck/latest" --export-hf "$CK/hf"
fi
HAVE_REF=$REF
"$PYTHON" -c 'import torch, transformers' 2>/dev/null || HAVE_REF=0

# prompt b: letters, the same ids hf_generate_cpu.py builds
prompts() { perl -e 'for my $b (0 .. $ARGV[0] - 1) { print join("", map { chr(97 + ($b * 7 + $_ * 3) % 26) } 0 .. $ARGV[1] - 1), "\n" }' "$@"; }

now() { perl -MTime::HiRes=time -e 'printf "%.6f\n", time'; }
ours() { # ours BATCH ROUNDS NEW THREADS WAIT: seconds
	prompts $(($1 * $2)) "$PROMPT" > "$TMP/p.txt"
	t0=$(now)
	OMP_WAIT_POLICY=$5 "$BIN/lm-sample" -c "$CK/ck/latest" -t "$TMP/byte.tok" -j "$4" \
		-i "$TMP/p.txt" --temperature 0 --batch "$1" --max-tokens "$3" > /dev/null
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}
best() { # best CMD...: the least of REPEAT runs
	for i in $(seq "$REPEAT"); do "$@"; done | sort -g | head -1
}

for n in $THREADS; do
	for b in $BATCHES; do
		r=$ROUNDS
		[ "$b" = 1 ] && r=$ROUNDS1
		tps=0
		for w in $WAIT; do
			tn=$(best ours "$b" "$r" "$NEW" "$n" "$w")
			t1=$(best ours "$b" "$r" 1 "$n" "$w")
			t=$(awk -v b="$b" -v r="$r" -v m="$NEW" -v tn="$tn" -v t1="$t1" 'BEGIN { printf "%.1f", r * b * (m - 1) / (tn - t1) }')
			echo "{\"impl\":\"lm-sample\",\"model\":\"$MODEL\",\"batch\":$b,\"rounds\":$r,\"prompt\":$PROMPT,\"new\":$NEW,\"threads\":$n,\"omp_wait_policy\":\"$w\",\"omp_proc_bind\":\"${OMP_PROC_BIND:-}\",\"omp_places\":\"${OMP_PLACES:-}\",\"lmpipe_decode_work\":\"${LMPIPE_DECODE_WORK:-}\",\"tokens_per_s\":$t,\"t_new_s\":$tn,\"t_1_s\":$t1}"
			tps=$(awk -v a="$tps" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
		done
		if [ "$HAVE_REF" = 0 ]; then
			echo "{\"impl\":\"hf-generate\",\"skipped\":\"REF=0, or no torch or transformers\"}"
			continue
		fi
		ref=$(env -u OMP_PROC_BIND -u OMP_PLACES "$PYTHON" "$ROOT/bench/hf_generate_cpu.py" "$CK/hf" "$b" "$PROMPT" "$NEW" "$n" "$r")
		echo "$ref"
		theirs=$(echo "$ref" | sed -n 's/.*"tokens_per_s": \([0-9.]*\).*/\1/p')
		echo "{\"batch\":$b,\"threads\":$n,\"best_of_wait_policies\":true,\"ratio_lm_sample_over_hf_generate\":$(awk -v a="$tps" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')}"
	done
done
