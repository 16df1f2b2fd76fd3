#!/bin/sh
# pipelines/align-eval.sh CHECKPOINT STAGE DIR: greedy answers of CHECKPOINT
# to DIR/test.jsonl, scored by rl-reward (r1-zero); writes DIR/eval-STAGE.json,
# one line {"stage", "accuracy", "format", "seconds" since DIR/t0}.  Used by
# align.mk, which sets BIN, TOK, DEVICE and MAX_TOKENS.
set -eu
ck=$1 stage=$2 out=$3
"$BIN/lm-sample" -c "$ck" -t "$TOK" --jsonl --device "$DEVICE" --max-tokens "$MAX_TOKENS" \
	--stop '</answer>' --temperature 0 -i "$out/test.jsonl" > "$out/eval-$stage.jsonl"
summary=$("$BIN/rl-reward" -v -o "$out/eval-$stage.scored.jsonl" "$out/eval-$stage.jsonl" 2>&1)
format=$(printf '%s\n' "$summary" | sed -n 's/.*format \([0-9.]*\),.*/\1/p')
accuracy=$(printf '%s\n' "$summary" | sed -n 's/.*answer \([0-9.]*\)$/\1/p')
[ -n "$format" ] && [ -n "$accuracy" ] || { echo "align-eval.sh: cannot read rl-reward's summary: $summary" >&2; exit 1; }
secs=$(( $(date +%s) - $(cat "$out/t0") ))
printf '{"stage":"%s","accuracy":%s,"format":%s,"seconds":%s}\n' "$stage" "$accuracy" "$format" "$secs" \
	> "$out/eval-$stage.json.tmp"
mv "$out/eval-$stage.json.tmp" "$out/eval-$stage.json"
