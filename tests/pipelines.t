#!/bin/sh
# tests/pipelines.t: a miniature of pipelines/pretrain.mk chained into
# pipelines/align.mk, end to end on CPU (a generated text, a tiny model, a
# few steps), checking each artefact: tokenizer, shards (shard-pack -t),
# checkpoint (it loads: lm-sample uses it), samples decode, rewards present,
# the per-stage log, plots are PNG files.  The numbers mean nothing at this
# size; the plumbing is the point.
. "$(dirname "$0")/lib.sh"
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "1..0 # SKIP gnuplot is not installed (apt-get install gnuplot-nox)"; exit 0
fi
cd "$TMP" || exit 1
W=$TMP/w
mkdir -p "$W"
perl "$LMPIPE_ROOT/tests/mktext.pl" 1500 2 | awk '{ print } NR % 10 == 0 { print "<|endoftext|>" }' > "$W/corpus.txt"
export OMP_WAIT_POLICY=passive
make -s -f "$LMPIPE_ROOT/pipelines/pretrain.mk" BIN="$LMPIPE_BIN" W="$W" VOCAB=300 VAL_DOCS=10 \
	MODEL_OPTS="--vocab 300 --context 192 --d-model 32 --layers 1 --heads 2 --d-ff 64" \
	STEPS=12 BATCH=4 EVAL_EVERY=6 WARMUP=2 TRAIN_OPTS="-j 1" \
	SAMPLE_OPTS="--max-tokens 8 -j 1" > make1.out 2>&1
ok $? "pretrain.mk runs" || sed 's/^/# /' make1.out | tail -20

bpe-encode -t "$W/tok.bpe" --text "$W/corpus.txt" > /dev/null 2>&1
ok $? "the tokenizer loads and encodes"
shard-pack -t "$W"/data/train-*.lms > /dev/null 2>&1
ok $? "the shards verify"
[ -L "$W/ckpt/latest" ] && [ -s "$W/ckpt/latest" ]
ok $? "a checkpoint with latest"
[ "$(grep -c . "$W/samples.txt")" -ge 1 ]
ok $? "samples were written"
is "$(head -c 4 "$W/loss.png" | od -An -c | tr -d ' ')" "211PNG" "loss.png is a PNG"

make -s -f "$LMPIPE_ROOT/pipelines/pretrain.mk" BIN="$LMPIPE_BIN" W="$W" -q VOCAB=300 VAL_DOCS=10 \
	MODEL_OPTS="--vocab 300 --context 192 --d-model 32 --layers 1 --heads 2 --d-ff 64" \
	STEPS=12 BATCH=4 EVAL_EVERY=6 WARMUP=2 TRAIN_OPTS="-j 1" SAMPLE_OPTS="--max-tokens 8 -j 1"
ok $? "a second run has nothing to redo"

printf 'Q: {question}\nA: <think>' > tmpl
make -s -f "$LMPIPE_ROOT/pipelines/align.mk" BIN="$LMPIPE_BIN" W="$W" TEMPLATE="$TMP/tmpl" \
	N_TRAIN=6 N_TEST=3 PROMPTS=2 G=2 ROUNDS=2 MAX_TOKENS=6 SFT_BATCH=3 GRPO_BATCH=4 > make2.out 2>&1
ok $? "align.mk runs" || sed 's/^/# /' make2.out | tail -20
A=$W/align
is "$(sed 's/^{"stage":"\([^"]*\)".*/\1/' "$A/log.jsonl" | tr '\n' ' ')" "base sft grpo-1 grpo-2 " "every stage is logged"
grep -qv '"accuracy":[0-9.]*,"format":[0-9.]*,"seconds":[0-9]*}$' "$A/log.jsonl"
[ $? = 1 ]; ok $? "with accuracy, format rate and time"
n=$(grep -c '"reward":' "$A/round-1/scored.jsonl")
is "$n" 4 "every rollout of round 1 has a reward (G x PROMPTS)"
[ -L "$A/round-2/latest" ] && [ -s "$A/round-2/metrics.json" ] && [ -s "$A/report.txt" ]
ok $? "report, per-round metrics and the final checkpoint"
grep -Eq '^SFT: [0-9.]+ -> [0-9.]+ \([+-][0-9.]+, [+-][0-9]+ of 3 problems\)$' "$A/report.txt" &&
	grep -Eq '^GRPO, 2 rounds: [0-9.]+ -> [0-9.]+ \([+-][0-9.]+, [+-][0-9]+ of 3 problems\)$' "$A/report.txt"
ok $? "the report ends with the comparison, SFT against base and GRPO against SFT"
is "$(head -c 4 "$A/reward.png" | od -An -c | tr -d ' ')" "211PNG" "reward.png is a PNG"

# GSM8K-format problems through TASK and TEST_TASK: training problems and
# rounds' prompts from one file, the held-out ones from another, each
# drawn by the seed align.mk passes
for i in 1 2 3 4 5 6 7 8; do
	printf '{"question":"train %d plus 1?","answer":"it is %d\\n#### %d"}\n' $i $((i + 1)) $((i + 1))
done > train.g
for i in 1 2 3 4; do
	printf '{"question":"test %d plus 2?","answer":"it is %d\\n#### %d"}\n' $i $((i + 2)) $((i + 2))
done > test.g
make -s -f "$LMPIPE_ROOT/pipelines/align.mk" BIN="$LMPIPE_BIN" W="$W" A="$W/gsm" \
	TASK="$LMPIPE_BIN/lm-task gsm8k -t $TMP/tmpl $TMP/train.g" \
	TEST_TASK="$LMPIPE_BIN/lm-task gsm8k -t $TMP/tmpl $TMP/test.g" \
	N_TRAIN=6 N_TEST=3 PROMPTS=2 G=2 ROUNDS=1 MAX_TOKENS=6 SFT_BATCH=3 GRPO_BATCH=4 > make3.out 2>&1
ok $? "align.mk on GSM8K-format files (TASK, TEST_TASK)" || sed 's/^/# /' make3.out | tail -20
is "$(grep -c '"prompt":"Q: train' "$W/gsm/train.jsonl") $(grep -c '"prompt":"Q: test' "$W/gsm/test.jsonl")" \
	"6 3" "its training problems from the one file, the held-out ones from the other"
is "$(grep -c '"prompt":"Q: train' "$W/gsm/round-1/scored.jsonl")" 4 \
	"the round's prompts from the training file (G x PROMPTS rollouts)"

# DEVICE=cuda reaches every program that runs the model: each lm-sample and
# rl-update command of a dry run, and the evaluation script's DEVICE
make -s -n -B -f "$LMPIPE_ROOT/pipelines/align.mk" BIN="$LMPIPE_BIN" W="$W" ROUNDS=2 DEVICE=cuda \
	> dry.out 2>&1
ok $? "align.mk DEVICE=cuda: a dry run" || sed 's/^/# /' dry.out | tail -5
perl -ne 'for (split /\|/) { if (/\b(lm-sample|rl-update)\b/) { $n++; $bad++ unless /--device cuda/ } }
	if (/align-eval\.sh/) { $n++; $bad++ unless /DEVICE=cuda/ }
	END { print $n + 0, " ", $bad + 0, "\n" }' dry.out > dry.count
is "$(cat dry.count)" "9 0" "DEVICE=cuda: SFT, 2 rounds of sampling and updates, 4 evaluations, all on the GPU"
done_testing
