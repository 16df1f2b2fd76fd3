#!/bin/sh
# tests/rl-experiment.t: bench/rl-experiment.sh's smoke mode end to end on
# the CPU (a generated text instead of Gutenberg, a tiny model, two GRPO
# and two Dr. GRPO rounds): every stage of both methods reaches the
# results, Dr. GRPO's updates ran with its options (a wrapper logs
# rl-update's), both methods start from one SFT checkpoint, and a second run
# redoes nothing.  The accuracies mean nothing at this size.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
perl "$LMPIPE_ROOT/tests/mktext.pl" 3000 2 > text.txt
# the programs, with rl-update logging its options
mkdir bin
for p in "$LMPIPE_BIN"/*; do ln -s "$p" bin/; done
rm bin/rl-update
printf '#!/bin/sh\necho "$*" >> %s/update.log\nexec %s/rl-update "$@"\n' "$TMP" "$LMPIPE_BIN" > bin/rl-update
chmod +x bin/rl-update
export OMP_WAIT_POLICY=passive
MODE=smoke DEVICE=cpu TEXT=$TMP/text.txt W=$TMP/w LMPIPE_BIN=$TMP/bin \
	sh "$LMPIPE_ROOT/bench/rl-experiment.sh" > out.txt 2> err.txt
ok $? "the smoke mode runs" || sed 's/^/# /' err.txt | tail -20
is "$(sed -n 's/^\([a-z0-9-]*\)  *[0-9.]* ([0-9.]*).*  *[0-9.]* ([0-9.]*).*$/\1/p' out.txt | tr '\n' ' ')" \
	"base sft grpo-1 grpo-2 " "the results table: base, SFT and two rounds of each method"
is "$(grep -c '"method":"drgrpo","stage":' w/results.jsonl) $(grep -c '"method":"grpo","stage":' w/results.jsonl)" \
	"4 4" "results.jsonl: a line per stage and method"
is "$(grep -c -- '-a sft' update.log) $(grep -v -- '-a sft' update.log | grep -c -- '--no-std --agg normalize') $(grep -v -- '-a sft' update.log | grep -vc -- '--no-std')" \
	"1 2 2" "one SFT run, two Dr. GRPO updates (--no-std --agg normalize), two GRPO updates"
cmp -s w/grpo/sft/latest w/drgrpo/sft/latest
ok $? "both methods start from the same SFT checkpoint"
grep -q 'corpus: [0-9]* bytes' err.txt
ok $? "the corpus mixes the text and the math problems"
t=$(stat -c %Y w/drgrpo/round-2/metrics.json)
MODE=smoke DEVICE=cpu TEXT=$TMP/text.txt W=$TMP/w LMPIPE_BIN=$TMP/bin \
	sh "$LMPIPE_ROOT/bench/rl-experiment.sh" > out2.txt 2> err2.txt
ok $? "a second run" && is "$(stat -c %Y w/drgrpo/round-2/metrics.json)" "$t" "a second run redoes nothing"
done_testing
