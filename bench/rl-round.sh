#!/bin/sh
# bench/rl-round.sh: the wall time of one RL round on DEVICE, split into
# its programs: sampling (lm-sample: PROMPTS prompts x G completions of NEW
# tokens each, top-p, no early stop), scoring (rl-reward, the r1-zero
# grader) and the update (rl-update, one GRPO step over all the rollouts),
# with rl-update's own split (read, forward/backward, optimizer, write)
# from its summary line.  Issue 21's target: at most 5 s for 256 x 8 x 256
# on the ts shape on one H200.  One JSON line per round, best of REPEAT by
# the total; builds nothing (bin/ must hold the programs).
#
# The model: CK=FILE, a checkpoint whose context holds a prompt and NEW
# tokens; or, without CK, one trained here for STEPS steps on DEVICE: the
# ts shape (V=10000, d=512, L=4, H=16, d_ff=1344) with a context of CTX,
# on arithmetic text from lm-task, with a byte-level tokenizer (the
# sampler draws among its 256 tokens; the model's compute is the ts
# shape's).  The prompts are lm-task arith problems (pipelines/arith.prompt).
#
#   DEVICE=cuda  PROMPTS=256  G=8  NEW=256  MB=64 (rl-update --micro-batch)
#   MODEL=ts  CTX=512  STEPS=20  DIGITS=3  REPEAT=2  CK=  TOK= (with CK)
#   BATCH= lm-sample --batch (default: its own)
#   UPDATE_OPTS= more rl-update options (--profile: its per-op table on stderr)
#
#   bench/rl-round.sh                       (on the GPU machine, after make)
#   DEVICE=cpu PROMPTS=4 G=2 NEW=8 MODEL=tiny STEPS=2 REPEAT=1 bench/rl-round.sh
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
DEVICE=${DEVICE:-cuda}
PROMPTS=${PROMPTS:-256}
G=${G:-8}
NEW=${NEW:-256}
MB=${MB:-64}
MODEL=${MODEL:-ts}
CTX=${CTX:-512}
STEPS=${STEPS:-20}
DIGITS=${DIGITS:-3}
REPEAT=${REPEAT:-2}
BATCH=${BATCH:-}
UPDATE_OPTS=${UPDATE_OPTS:-}
CK=${CK:-}
TOK=${TOK:-}
for p in lm-task lm-train lm-sample rl-reward rl-update shard-pack bpe-encode; do
	[ -x "$BIN/$p" ] || { echo "rl-round.sh: no $BIN/$p (run make first)" >&2; exit 1; }
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rl-round.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

if [ -z "$TOK" ]; then
	TOK=$TMP/byte.tok
	perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
		for (0 .. 255) { my $c = chr; print "t $_ \"",
			($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
		print "end\n"' > "$TOK"
fi
if [ -z "$CK" ]; then
	"$BIN/lm-task" arith -n 20000 -d "$DIGITS" -r -t "$ROOT/pipelines/arith.prompt" |
		perl -MJSON::PP -ne 'my $r = decode_json($_); print $r->{prompt}, $r->{response}, "\n"' \
		> "$TMP/text.txt"
	"$BIN/bpe-encode" -t "$TOK" "$TMP/text.txt" | "$BIN/shard-pack" -o "$TMP/d" 2>/dev/null
	"$BIN/lm-train" --device "$DEVICE" -m "$MODEL" --vocab 10000 --context "$CTX" -b 16 -n "$STEPS" \
		--warmup 2 --lr 1e-3 -d "$TMP/d" -o "$TMP/ck" --ckpt-every "$STEPS" 2>/dev/null
	CK=$TMP/ck/latest
fi
"$BIN/lm-task" arith -n "$PROMPTS" -d "$DIGITS" -s 7 -t "$ROOT/pipelines/arith.prompt" > "$TMP/p.jsonl"

now() { perl -MTime::HiRes=time -e 'printf "%.6f\n", time'; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
best=""
r=0
while [ $r -lt "$REPEAT" ]; do
	load=$(cut -d' ' -f1 /proc/loadavg)
	t0=$(now)
	# shellcheck disable=SC2086
	"$BIN/lm-sample" -c "$CK" -t "$TOK" --jsonl --device "$DEVICE" -i "$TMP/p.jsonl" -n "$G" \
		--max-tokens "$NEW" --top-p 0.95 --seed $((r + 1)) ${BATCH:+--batch $BATCH} \
		> "$TMP/ro.jsonl" 2>"$TMP/sample.err"
	t1=$(now)
	"$BIN/rl-reward" -r r1-zero "$TMP/ro.jsonl" > "$TMP/sc.jsonl" 2>"$TMP/reward.err"
	t2=$(now)
	rm -rf "$TMP/out"
	# shellcheck disable=SC2086
	"$BIN/rl-update" -c "$CK" -o "$TMP/out" --device "$DEVICE" -m "$MB" --lr 1e-5 $UPDATE_OPTS \
		"$TMP/sc.jsonl" > "$TMP/metrics.json" 2>"$TMP/update.err"
	t3=$(now)
	sed -n '/^rl-update: profile of/,/^rl-update: [0-9.]* s:/p' "$TMP/update.err" >&2
	tokens=$(perl -MJSON::PP -ne '$n += @{decode_json($_)->{completion_ids}}; END { print $n + 0 }' \
		"$TMP/ro.jsonl")
	split=$(sed -n 's/^rl-update: \([0-9.]*\) s: read \([0-9.]*\), reference [0-9.]*, forward\/backward \([0-9.]*\), optimizer \([0-9.]*\), write \([0-9.]*\)$/"update_read_s":\2,"update_fwd_bwd_s":\3,"update_optim_s":\4,"update_write_s":\5/p' \
		"$TMP/update.err")
	line=$(printf '{"bench":"rl-round","device":"%s","model":"%s","prompts":%s,"g":%s,"new":%s,"completion_tokens":%s,"micro_batch":%s,"total_s":%s,"sample_s":%s,"score_s":%s,"update_s":%s,%s,"load":%s}' \
		"$DEVICE" "$MODEL" "$PROMPTS" "$G" "$NEW" "$tokens" "$MB" "$(secs "$t0" "$t3")" \
		"$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")" "$(secs "$t2" "$t3")" "${split:-\"update_split\":null}" "$load")
	echo "$line"
	total=$(secs "$t0" "$t3")
	if [ -z "$best" ] || awk -v a="$total" -v b="$best" 'BEGIN { exit !(a < b) }'; then
		best=$total best_line=$line
	fi
	r=$((r + 1))
done
echo "$best_line" | sed 's/"bench":"rl-round"/"bench":"rl-round-best"/'
awk -v t="$best" 'BEGIN { printf "# best round %.3f s (target 5 s for 256 x 8 x 256 on the ts shape)\n", t }' >&2
