#!/bin/sh
# tests/align.t: pipelines/align.mk runs end to end on a tiny byte-level
# model (base eval, SFT, two GRPO rounds, an eval after each) and logs every
# stage; the numbers mean nothing at this size, the plumbing is the point.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
perl "$LMPIPE_ROOT/tests/mktext.pl" 200 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
if ! shard-pack -o d < text.tok 2>shard.err; then
	echo "1..0 # SKIP shard-pack failed: $(head -1 shard.err)"; exit 0
fi
lm-train -m tiny --vocab 256 --context 192 -b 4 -n 3 -d d -o ck -j 1 2>/dev/null
ok $? "a tiny model" || { done_testing; exit 1; }
printf 'Q: {question}\nA: <think>' > tmpl
make -s -f "$LMPIPE_ROOT/pipelines/align.mk" BIN="$LMPIPE_BIN" BASE=ck/latest TOK=byte.tok OUT=al \
	TEMPLATE=tmpl N_TRAIN=6 N_TEST=3 PROMPTS=2 G=2 ROUNDS=2 MAX_TOKENS=6 SFT_BATCH=3 GRPO_BATCH=4 \
	> make.out 2>&1
ok $? "the pipeline runs" || sed 's/^/# /' make.out | tail -20
is "$(sed 's/^{"stage":"\([^"]*\)".*/\1/' al/log.jsonl | tr '\n' ' ')" "base sft grpo-1 grpo-2 " "every stage is logged"
grep -qv '"accuracy":[0-9.]*,"format":[0-9.]*,"seconds":[0-9]*}$' al/log.jsonl
[ $? = 1 ]; ok $? "with accuracy, format rate and time"
[ -f al/report.txt ] && [ -s al/rounds/2.metrics.jsonl ] && [ -L al/grpo/latest ]
ok $? "report, per-round metrics and the final checkpoint"
done_testing
