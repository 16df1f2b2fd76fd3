#!/bin/sh
# bench/lm-sample-cpu.sh: generation tokens/s of lm-sample on the CPU beside
# Hugging Face transformers generate() (bench/hf_generate_cpu.py) on the
# same checkpoint, exported with lm-train --export-hf, on the same machine
# in the same run, with equal thread counts.  Greedy decoding of BATCH
# prompts of PROMPT tokens, NEW tokens each, no early stop.  Both sides are
# timed twice, with NEW and with 1 new token, and the figure is
# BATCH x (NEW - 1) / (t_NEW - t_1): decoding speed, without loading and
# prefill.  One JSON line per measurement, then the ratio.
#
#   THREADS="16 2"  thread counts (default: all cores)
#   BATCHES="1 64"  MODEL=s5m  PROMPT=32  NEW=64
#   WAIT="active passive"  OMP_WAIT_POLICY values to run lm-sample with
#                   (spinning OpenMP threads compete with OpenBLAS's own
#                   pthreads; which one wins depends on the machine)
#   PYTHON=python3  (the reference is skipped when it has no torch/transformers)
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
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lm-sample-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# a byte-level tokenizer (256 tokens; the model's vocabulary may be larger)
perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > "$TMP/byte.tok"
perl "$ROOT/tests/mktext.pl" 2000 3 | perl "$ROOT/tests/bytes2tok.pl" > "$TMP/t.tok"
"$BIN/shard-pack" -o "$TMP/d" < "$TMP/t.tok"
"$BIN/lm-train" -m "$MODEL" -b 2 -n 2 -d "$TMP/d" -o "$TMP/ck" 2>/dev/null
"$BIN/lm-train" -c "$TMP/ck/latest" --export-hf "$TMP/hf"
HAVE_REF=1
"$PYTHON" -c 'import torch, transformers' 2>/dev/null || HAVE_REF=0

# prompt b: letters, the same ids hf_generate_cpu.py builds
prompts() { perl -e 'for my $b (0 .. $ARGV[0] - 1) { print join("", map { chr(97 + ($b * 7 + $_ * 3) % 26) } 0 .. $ARGV[1] - 1), "\n" }' "$@"; }

now() { perl -MTime::HiRes=time -e 'printf "%.6f\n", time'; }
ours() { # ours BATCH NEW THREADS WAIT: seconds
	prompts "$1" "$PROMPT" > "$TMP/p.txt"
	t0=$(now)
	OMP_WAIT_POLICY=$4 "$BIN/lm-sample" -c "$TMP/ck/latest" -t "$TMP/byte.tok" -j "$3" \
		-i "$TMP/p.txt" --temperature 0 --batch "$1" --max-tokens "$2" > /dev/null
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}
best() { # best CMD...: the least of 3 runs
	{ "$@"; "$@"; "$@"; } | sort -g | head -1
}

for n in $THREADS; do
	for b in $BATCHES; do
		tps=0
		for w in $WAIT; do
			tn=$(best ours "$b" "$NEW" "$n" "$w")
			t1=$(best ours "$b" 1 "$n" "$w")
			t=$(awk -v b="$b" -v m="$NEW" -v tn="$tn" -v t1="$t1" 'BEGIN { printf "%.1f", b * (m - 1) / (tn - t1) }')
			echo "{\"impl\":\"lm-sample\",\"model\":\"$MODEL\",\"batch\":$b,\"prompt\":$PROMPT,\"new\":$NEW,\"threads\":$n,\"omp_wait_policy\":\"$w\",\"tokens_per_s\":$t,\"t_new_s\":$tn,\"t_1_s\":$t1}"
			tps=$(awk -v a="$tps" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
		done
		if [ "$HAVE_REF" = 0 ]; then
			echo "{\"impl\":\"hf-generate\",\"skipped\":\"no torch or transformers\"}"
			continue
		fi
		ref=$("$PYTHON" "$ROOT/bench/hf_generate_cpu.py" "$TMP/hf" "$b" "$PROMPT" "$NEW" "$n")
		echo "$ref"
		theirs=$(echo "$ref" | sed -n 's/.*"tokens_per_s": \([0-9.]*\).*/\1/p')
		echo "{\"batch\":$b,\"threads\":$n,\"best_of_wait_policies\":true,\"ratio_lm_sample_over_hf_generate\":$(awk -v a="$tps" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')}"
	done
done
