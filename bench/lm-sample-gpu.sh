#!/bin/sh
# bench/lm-sample-gpu.sh: generation tokens/s of lm-sample --device "$DEVICE"
# beside Hugging Face generate() (bench/hf_generate_gpu.py: a static KV
# cache compiled by torch.compile, and plain generate()) on the same
# checkpoint, exported with lm-train --export-hf, in the same run on the
# same GPU.  Top-p sampling (TOP_P) of ROUNDS batches of BATCH prompts of
# about PROMPT tokens, NEW tokens each, no early stop (the tokenizer has no
# end-of-text token).  Both sides are timed with NEW and with 1 new token,
# and the figure is ROUNDS x BATCH x (NEW - 1) / (t_NEW - t_1): decoding
# speed without loading, warm-up and prefill.  Both sides time inside their
# process: generate() calls after warm-up calls for Hugging Face,
# lm-sample --stats's generate_s (its first steps, run before their CUDA
# graphs are recorded, and the recording are in it) for lmpipe; a whole
# process's time varies by tenths of a second with the device's start,
# as much as the difference measured (ours_wall_s: those times).
# lm-sample runs with CUDA_MODULE_LOADING=EAGER (unless set): its kernels
# are loaded with the CUDA context, in load_s, not at their first launch
# inside the timed generation (the decoding step's kernels only in the NEW
# run), as generate()'s warm-up calls load PyTorch's before its timing.
# decode_tokens_per_s: the NEW run's decoding turns alone (--stats's
# decode_tokens / decode_s, first steps included), decode_max_s its
# slowest turn.  tokens_per_s_warm (WARM=1): the same runs again with
# twice the rounds, and the speed of the added rounds alone,
# ROUNDS x BATCH x (NEW - 1) / ((t_NEW(2R) - t_NEW(R)) - (t_1(2R) - t_1(R))):
# what a run pays once (the decoding step's first runs, its graphs'
# recording, the products' first plans) cancels, as generate()'s warm-up
# calls keep the same out of Hugging Face's timing; the ratios are given
# for both figures.  One JSON line per measurement, then the ratios.
#
#   TEXT=FILE       text for the tokenizer, the model's 2 training steps and
#                   the prompts (default: ../shared/data's tinyshakespeare)
#   MODEL=ts  VOCAB=10000  PROMPT=32  NEW=256  TOP_P=0.95  BATCHES="1 64"
#   ROUNDS1=24 ROUNDS=16  lm-sample rounds at batch 1 and at other batches (8 before
#                   stop 50: 16 halves the weight of the first round's one-time costs)
#   HF_ROUNDS1=2 HF_ROUNDS=2  generate() rounds (it is slow at batch 1)
#   REPEAT=3        lm-sample runs per timing (the least counts)
#   WARM=1          also the runs of twice the rounds (0: not)
#   HF_MODES="static dynamic"   REF=0: no generate() reference
#   PYTHON=python3  DEVICE=cuda (cpu: to try the script where there is no GPU)
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
TEXT=${TEXT:-$ROOT/../shared/data/corpus/tinyshakespeare.txt}
MODEL=${MODEL:-ts}
VOCAB=${VOCAB:-10000}
PROMPT=${PROMPT:-32}
NEW=${NEW:-256}
TOP_P=${TOP_P:-0.95}
BATCHES=${BATCHES:-1 64}
ROUNDS1=${ROUNDS1:-24}
ROUNDS=${ROUNDS:-16}
HF_ROUNDS1=${HF_ROUNDS1:-2}
HF_ROUNDS=${HF_ROUNDS:-2}
REPEAT=${REPEAT:-3}
WARM=${WARM:-1}
HF_MODES=${HF_MODES:-static dynamic}
REF=${REF:-1}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
[ -r "$TEXT" ] || { echo "lm-sample-gpu.sh: no text at $TEXT (set TEXT=FILE)" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lm-sample-gpu.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

"$BIN/bpe-learn" -v "$VOCAB" -o "$TMP/tok" "$TEXT" 2>/dev/null
"$BIN/bpe-encode" -t "$TMP/tok" "$TEXT" | "$BIN/shard-pack" -o "$TMP/d" 2>/dev/null
"$BIN/lm-train" --device "$DEVICE" -m "$MODEL" -b 8 -n 2 -d "$TMP/d" -o "$TMP/ck" 2>/dev/null
"$BIN/lm-train" -c "$TMP/ck/latest" --export-hf "$TMP/hf" 2>/dev/null
# prompts: lines of the text, cut to about PROMPT tokens by lm-sample itself
perl -0777 -MJSON::PP -ne 's/\s+/ /g; for my $i (0 .. 255) {
	print encode_json({ prompt => substr($_, $i * 997 % (length($_) - 300), 200) }), "\n" }' "$TEXT" > "$TMP/lines.txt"
"$BIN/lm-sample" -c "$TMP/ck/latest" -t "$TMP/tok" --device "$DEVICE" -i "$TMP/lines.txt" --max-tokens 1 \
	--jsonl < /dev/null 2>/dev/null |
	perl -MJSON::PP -ne 'my $r = decode_json($_); my @p = @{$r->{prompt_ids}};
		next if @p < '"$PROMPT"'; print encode_json([@p[0 .. '"$PROMPT"' - 1]]), "\n"' > "$TMP/ids.jsonl"
[ -s "$TMP/ids.jsonl" ] || { echo "lm-sample-gpu.sh: no prompts of $PROMPT tokens" >&2; exit 1; }

now() { perl -MTime::HiRes=time -e 'printf "%.6f\n", time'; }
ours() { # ours BATCH ROUNDS NEW: seconds for ROUNDS x BATCH prompts
	n=$(($1 * $2))
	perl -e 'my @l = <STDIN>; print $l[$_ % @l] for 0 .. $ARGV[0] - 1' "$n" < "$TMP/prompts.txt" > "$TMP/p.txt"
	t0=$(now)
	CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER} "$BIN/lm-sample" -c "$TMP/ck/latest" -t "$TMP/tok" \
		--device "$DEVICE" -i "$TMP/p.txt" --top-p "$TOP_P" --seed 1 --batch "$1" --max-tokens "$3" \
		--stats > /dev/null 2> "$TMP/stats"
	t1=$(now)
	# generate_s, then the wall time, decode_s, decode_tokens and decode_max_s
	v=$(perl -MJSON::PP -ne 'print join(" ", @{decode_json($1)}{qw(generate_s decode_s decode_tokens decode_max_s)})
		if /^lm-sample: stats: (.*)/' "$TMP/stats")
	[ -n "$v" ] || { cat "$TMP/stats" >&2; exit 1; }
	set -- $v
	awk -v a="$t0" -v b="$t1" -v g="$1" -v rest="$2 $3 $4" 'BEGIN { print g, b - a, rest }'
}
# the run of the least generate_s of REPEAT
# (a failed run fails it: a pipeline's status would be head's)
best() {
	runs=$(for i in $(seq "$REPEAT"); do "$@" || exit 1; done) || return 1
	printf '%s\n' "$runs" | sort -g | head -1
}

# prompt texts: the ids decoded back (lm-sample re-encodes them; the count
# may differ by a token or so, which the difference of two timings cancels)
perl -MJSON::PP -ne 'print join(" ", @{decode_json($_)}), "\n"' "$TMP/ids.jsonl" |
	head -128 | while read -r line; do
		echo "$line" | "$BIN/bpe-decode" -t "$TMP/tok" --text | tr '\n' ' '
		echo
	done > "$TMP/prompts.txt"

HAVE_REF=$REF
"$PYTHON" -c 'import torch, transformers' 2>/dev/null || HAVE_REF=0
for b in $BATCHES; do
	r=$ROUNDS hr=$HF_ROUNDS
	[ "$b" = 1 ] && r=$ROUNDS1 hr=$HF_ROUNDS1
	tn=$(best ours "$b" "$r" "$NEW") && t1=$(best ours "$b" "$r" 1) || exit 1
	set -- $tn; gn=$1 wn=$2 ds=$3 dt=$4 dm=$5; set -- $t1; g1=$1 w1=$2
	tps=$(awk -v b="$b" -v r="$r" -v m="$NEW" -v tn="$gn" -v t1="$g1" 'BEGIN { printf "%.1f", r * b * (m - 1) / (tn - t1) }')
	warm=
	if [ "$WARM" = 1 ]; then
		tn2=$(best ours "$b" $((2 * r)) "$NEW") && t12=$(best ours "$b" $((2 * r)) 1) || exit 1
		gn2=${tn2%% *} g12=${t12%% *}
		wps=$(awk -v b="$b" -v r="$r" -v m="$NEW" -v a="$gn" -v c="$gn2" -v x="$g1" -v y="$g12" \
			'BEGIN { d = (c - a) - (y - x); printf "%.1f", (d > 0 ? r * b * (m - 1) / d : 0) }')
		warm=",\"tokens_per_s_warm\":$wps,\"t_new_2r_s\":$gn2,\"t_1_2r_s\":$g12"
	fi
	dps=$(awk -v t="$dt" -v s="$ds" 'BEGIN { printf "%.1f", (s > 0 ? t / s : 0) }')
	echo "{\"impl\":\"lm-sample-$DEVICE\",\"model\":\"$MODEL\",\"batch\":$b,\"rounds\":$r,\"prompt\":$PROMPT,\"new\":$NEW,\"top_p\":$TOP_P,\"tokens_per_s\":$tps,\"t_new_s\":$gn,\"t_1_s\":$g1,\"ours_wall_s\":[$wn,$w1],\"decode_tokens_per_s\":$dps,\"decode_max_s\":$dm$warm}"
	[ "$HAVE_REF" = 1 ] || { echo '{"impl":"hf-generate","skipped":"REF=0, or no torch or transformers"}'; continue; }
	for mode in $HF_MODES; do
		ref=$("$PYTHON" "$ROOT/bench/hf_generate_gpu.py" "$TMP/hf" "$TMP/ids.jsonl" "$b" "$NEW" "$hr" "$TOP_P" "$mode" 2>"$TMP/hf.err") ||
			{ echo "{\"impl\":\"hf-generate-$mode\",\"failed\":true}"; tail -3 "$TMP/hf.err" >&2; continue; }
		echo "$ref"
		theirs=$(echo "$ref" | sed -n 's/.*"tokens_per_s": \([0-9.]*\).*/\1/p')
		wr=
		[ "$WARM" = 1 ] && wr=",\"ratio_warm\":$(awk -v a="$wps" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')"
		echo "{\"batch\":$b,\"ratio_lm_sample_over_hf_generate_$mode\":$(awk -v a="$tps" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')$wr}"
	done
done
