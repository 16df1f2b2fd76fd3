#!/bin/sh
# bench/lm-sample-prefill.sh: prefill tokens/s of lm-sample --device "$DEVICE",
# its chunks of whole prompts attending with training's flash kernels
# (the default) against the cache ops (LMPIPE_PREFILL_FLASH=0), on the same
# checkpoint in the same run.  PROMPTS prompts a run, BATCH at a time,
# --max-tokens 1, so that the time is the prompts' prefill; for each
# length of LENGTHS the prompts are cut to exactly that many tokens
# (--context LEN+1 --truncate), and "mixed" takes the lines as they come
# (up to 200 tokens).  The figure is --stats's prompt_tokens / prefill_s,
# the least prefill_s of REPEAT runs, with that run's split of the
# generation on the host's clock (--stats's input_s, feed_s, choose_s,
# output_s) and its slowest turn (prefill_max_s).  One JSON line per measurement.
#
#   TEXT=FILE   text for the tokenizer, the model's 2 training steps and the
#               prompts (default: ../shared/data's tinyshakespeare)
#   MODEL=ts  VOCAB=10000  LENGTHS="32 64 200 mixed"  PROMPTS=512  BATCH=64
#   REPEAT=3  DEVICE=cuda (cpu: to try the script where there is no GPU)
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
TEXT=${TEXT:-$ROOT/../shared/data/corpus/tinyshakespeare.txt}
MODEL=${MODEL:-ts}
VOCAB=${VOCAB:-10000}
LENGTHS=${LENGTHS:-32 64 200 mixed}
PROMPTS=${PROMPTS:-512}
BATCH=${BATCH:-64}
REPEAT=${REPEAT:-3}
DEVICE=${DEVICE:-cuda}
[ -r "$TEXT" ] || { echo "lm-sample-prefill.sh: no text at $TEXT (set TEXT=FILE)" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lm-sample-prefill.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

"$BIN/bpe-learn" -v "$VOCAB" -o "$TMP/tok" "$TEXT" 2>/dev/null
"$BIN/bpe-encode" -t "$TMP/tok" "$TEXT" | "$BIN/shard-pack" -o "$TMP/d" 2>/dev/null
"$BIN/lm-train" --device "$DEVICE" -m "$MODEL" -b 8 -n 2 -d "$TMP/d" -o "$TMP/ck" 2>/dev/null
# prompts: PROMPTS pieces of the text, of 1200 characters (long) and of 40
# to 800 (mixed)
for kind in long mixed; do
	perl -0777 -MJSON::PP -ne 's/\s+/ /g; for my $i (0 .. '"$PROMPTS"' - 1) {
		my $n = "'"$kind"'" eq "mixed" ? 40 + $i * 131 % 760 : 1200;
		print encode_json({ prompt => substr($_, $i * 997 % (length($_) - 1300), $n) }), "\n" }' \
		"$TEXT" > "$TMP/$kind.jsonl"
done

# run FLASH LEN: "prefill_s prompt_tokens input_s feed_s choose_s output_s prefill_max_s" of one run
run() {
	if [ "$2" = mixed ]; then in=$TMP/mixed.jsonl ctx=; else in=$TMP/long.jsonl ctx="--context $(($2 + 1))"; fi
	LMPIPE_PREFILL_FLASH=$1 CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER} "$BIN/lm-sample" \
		-c "$TMP/ck/latest" -t "$TMP/tok" --device "$DEVICE" -i "$in" --jsonl $ctx --truncate \
		--max-tokens 1 --batch "$BATCH" --seed 1 --stats > /dev/null 2> "$TMP/stats"
	v=$(perl -MJSON::PP -ne 'print join(" ", @{decode_json($1)}{qw(prefill_s prompt_tokens input_s feed_s choose_s output_s prefill_max_s)})
		if /^lm-sample: stats: (.*)/' "$TMP/stats")
	[ -n "$v" ] || { cat "$TMP/stats" >&2; exit 1; }
	echo "$v"
}
best() {
	runs=$(for i in $(seq "$REPEAT"); do run "$@" || exit 1; done) || return 1
	printf '%s\n' "$runs" | sort -g | head -1
}
for len in $LENGTHS; do
	for flash in 0 1; do
		r=$(best "$flash" "$len") || exit 1
		set -- $r
		echo "{\"impl\":\"lm-sample-$DEVICE\",\"model\":\"$MODEL\",\"prompt_len\":\"$len\",\"prompts\":$PROMPTS,\"batch\":$BATCH,\"prefill_flash\":$flash,\"prefill_s\":$1,\"prompt_tokens\":$2,\"input_s\":$3,\"feed_s\":$4,\"choose_s\":$5,\"output_s\":$6,\"prefill_max_s\":$7,\"prefill_tokens_per_s\":$(awk -v s="$1" -v n="$2" 'BEGIN { printf "%.1f", (s > 0 ? n / s : 0) }')}"
	done
done
