#!/bin/sh
# tests/lm-train-eval.t: evaluation of a checkpoint on its own
# (lm-train -c CKPT --val PREFIX: loss, perplexity, bits per byte with the
# tokenizer; --eval-stride's sliding windows) and inspection (lm-train -c
# CKPT --info).  The evaluation of the same windows gives the validation loss
# the training run logged, bit for bit.
. "$(dirname "$0")/lib.sh"
cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 2000 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt | shard-pack -o d --val-docs 100
perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
lm-train -m tiny --vocab 256 --context 64 -n 30 -d d --val d-val --eval-every 30 -o ck \
	--log run.jsonl -j 1 2>/dev/null
ok $? "a tiny run with a validation loss"
VAL=$(sed -n 's/.*"val_loss":\([0-9.e+-]*\).*/\1/p' run.jsonl | tail -1)
run lm-train -c ck/latest --val d-val -b 16 --eval-batches 20 -j 1 -t byte.tok
is "$rc" 0 "evaluation runs ($err)"
got() { printf '%s\n' "$out" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
is "$(got loss)" "$VAL" "the loss of the run's last evaluation, bit for bit"
is "$(got step)" 30 "the checkpoint's step"
perl -e 'exit !(abs(exp($ARGV[0]) - $ARGV[1]) < 1e-9 * $ARGV[1])' "$(got loss)" "$(got perplexity)"
ok $? "perplexity = exp(loss)"
# byte-level tokens: a byte per target, so bits per byte = loss / ln 2
is "$(got bytes)" "$(got tokens)" "one byte per byte-level token"
perl -e 'exit !(abs($ARGV[0] / log(2) - $ARGV[1]) < 1e-12)' "$(got loss)" "$(got bits_per_byte)"
ok $? "bits per byte = loss / ln 2 here ($(got bits_per_byte))"
run lm-train -c ck/latest --val d-val -j 1
is "$rc" 0 "without --eval-batches: every window"
is "$(got tokens)" "$(shard-pack -l d-val-*.lms | awk '$NF ~ /lms$/ { n += $1 - 1 } END { print int(n / 64) * 64 }')" "every window of the validation set counted"
FULL=$out
run lm-train -c ck/latest --val d-val -j 1 --eval-stride 64
is "$out" "$FULL" "--eval-stride of the context: the same evaluation"
# a sliding window: shard i holds floor((n_i - 1 - 64) / 16) + 1 windows, the
# first scoring 64 targets, each later one its last 16
run lm-train -c ck/latest --val d-val -j 1 -t byte.tok --eval-stride 16
is "$rc" 0 "--eval-stride 16 ($err)"
is "$(got stride)" 16 "the stride is in the line"
is "$(got tokens)" "$(shard-pack -l d-val-*.lms | awk '$NF ~ /lms$/ && $1 > 64 {
	n += 64 + int(($1 - 65) / 16) * 16 } END { print n }')" "first windows' 64 targets, the others' last 16"
is "$(got bytes)" "$(got tokens)" "bytes of the scored targets only"
SLIDE=$(got loss)
printf '%s\n' "$FULL" | grep -q "\"loss\":$SLIDE," && fail=1 || fail=0
is "$fail" 0 "a loss of its own ($SLIDE)"
lm-train -c ck/latest --val d-val -j 1 --eval-stride 65 > /dev/null 2> err.txt
is "$?" 2 "a stride above the context is a usage error"
grep -q 'evaluation stride of 65 tokens: it must be 1 to the context, 64' err.txt
ok $? "naming both ($(cat err.txt))"
lm-train -m tiny --vocab 256 --context 64 -n 30 -d d --val d-val --eval-every 30 --eval-batches 0 \
	--eval-stride 16 -o ck16 --log run16.jsonl -j 1 2>/dev/null
ok $? "a run whose validation slides by 16"
is "$(sed -n 's/.*"val_loss":\([0-9.e+-]*\).*/\1/p' run16.jsonl | tail -1)" "$SLIDE" \
	"its validation loss: the checkpoint's sliding evaluation, bit for bit"
lm-train -c ck16/latest --info | grep -q '"eval_stride":16'
ok $? "the checkpoint records the stride (--resume keeps it)"

run lm-train -c ck/latest --info
is "$rc" 0 "--info ($err)"
is "$(printf '%s\n' "$out" | sed -n 's/^step  *//p')" 30 "--info: the step"
printf '%s\n' "$out" | grep -q '^hyperparams *{"batch":16,"accum":1,"context":64,"lr":0.001,'
ok $? "--info: the hyper-parameters"
printf '%s\n' "$out" | grep -q '^model *vocab 256, context 64, d_model 32, layers 2, heads 4, d_ff 64'
ok $? "--info: the shape"
done_testing
