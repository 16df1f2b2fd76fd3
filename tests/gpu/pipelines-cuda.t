#!/bin/sh
# tests/gpu/pipelines-cuda.t: pipelines/pretrain.mk with DEVICE=cuda on a
# tiny generated corpus (the same miniature as tests/pipelines.t), then
# pipelines/align.mk with DEVICE=cuda on its model: every artefact is made,
# the training log says cuda, and every lm-train, lm-sample and rl-update
# command the pipelines ran was given --device cuda (what make demo
# DEMO_DEVICE=cuda runs, at demo size).  Needs a GPU; without gnuplot the
# plots are left out (their targets named instead of the default ones).
. "$(dirname "$0")/../lib.sh"

need_gpu
plots=1
command -v gnuplot >/dev/null 2>&1 || plots=0
cd "$TMP" || exit 1
W=$TMP/w
mkdir -p "$W"
perl "$LMPIPE_ROOT/tests/mktext.pl" 1500 2 | awk '{ print } NR % 10 == 0 { print "<|endoftext|>" }' > "$W/corpus.txt"
make -f "$LMPIPE_ROOT/pipelines/pretrain.mk" BIN="$LMPIPE_BIN" W="$W" DEVICE=cuda VOCAB=300 VAL_DOCS=10 \
	MODEL_OPTS="--vocab 300 --context 192 --d-model 64 --layers 2 --heads 2 --d-ff 160" \
	STEPS=40 BATCH=8 EVAL_EVERY=20 WARMUP=4 SAMPLE_OPTS="--max-tokens 8" \
	$([ $plots = 1 ] || echo "$W/samples.txt") > make1.out 2>&1
ok $? "pretrain.mk DEVICE=cuda runs" || sed 's/^/# /' make1.out | tail -20
shard-pack -t "$W"/data/train-*.lms > /dev/null 2>&1
ok $? "the shards verify"
[ -L "$W/ckpt/latest" ] && [ -s "$W/ckpt/latest" ] && [ -e "$W/ckpt/.done" ]
ok $? "a finished run's checkpoint with latest"
grep -q '"device":"cuda"' "$W/train.jsonl"
ok $? "the training log says cuda: $(grep -o '"backend":"[^"]*"' "$W/train.jsonl" | head -1)"
grep -q '"val_loss"' "$W/train.jsonl"
ok $? "with validation losses"
[ "$(grep -c . "$W/samples.txt")" -ge 1 ]
ok $? "samples were written"
if [ $plots = 1 ]; then
	is "$(head -c 4 "$W/loss.png" | od -An -c | tr -d ' ')" "211PNG" "loss.png is a PNG"
else
	echo "ok $((_tap_n += 1)) # SKIP loss.png: gnuplot is not installed"
fi

printf 'Q: {question}\nA: <think>' > tmpl
make -f "$LMPIPE_ROOT/pipelines/align.mk" BIN="$LMPIPE_BIN" W="$W" DEVICE=cuda TEMPLATE="$TMP/tmpl" \
	N_TRAIN=6 N_TEST=3 PROMPTS=2 G=2 ROUNDS=2 MAX_TOKENS=6 SFT_BATCH=3 GRPO_BATCH=4 \
	$([ $plots = 1 ] || echo "$W/align/report.txt") > make2.out 2>&1
ok $? "align.mk DEVICE=cuda runs" || sed 's/^/# /' make2.out | tail -20
A=$W/align
[ -L "$A/round-2/latest" ] && [ -s "$A/round-2/metrics.json" ] && [ -s "$A/report.txt" ]
ok $? "report, per-round metrics and the final checkpoint"
is "$(sed 's/^{"stage":"\([^"]*\)".*/\1/' "$A/log.jsonl" | tr '\n' ' ')" "base sft grpo-1 grpo-2 " "every stage is logged"

# Every command of the three programs was run with --device cuda (make
# echoes the recipes; align-eval.sh's lm-sample takes DEVICE from align.mk).
cat make1.out make2.out | grep -E '/(lm-train|lm-sample|rl-update) ' > cmds.txt
n=$(wc -l < cmds.txt)
bad=$(grep -v -- '--device cuda' cmds.txt | head -3)
[ "$n" -ge 3 ] && [ -z "$bad" ]
ok $? "all $n lm-train, lm-sample and rl-update commands have --device cuda${bad:+; not: $bad}"
grep -q 'DEVICE=cuda .*align-eval.sh' make2.out
ok $? "the held-out evaluation samples on cuda"
done_testing
