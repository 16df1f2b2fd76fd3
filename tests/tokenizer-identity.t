#!/bin/sh
# tests/tokenizer-identity.t: a checkpoint records its tokenizer's identity
# (lm-train -t: CRC-32C of ids, merges and specials, vocabulary size; else
# the shards' vocabulary size), and lm-sample and lm-train's evaluation
# refuse another tokenizer instead of printing garbage (issue 23 item 7).
. "$(dirname "$0")/lib.sh"
cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 1500 1 | awk '{ print } NR % 10 == 0 { print "<|endoftext|>" }' > a.txt
perl "$LMPIPE_ROOT/tests/mktext.pl" 1500 2 | tr 'a-z' 'n-za-m' | awk '{ print } NR % 10 == 0 { print "<|endoftext|>" }' > b.txt
bpe-learn -v 300 --special '<|endoftext|>' -o a.bpe a.txt 2>/dev/null &&
	bpe-learn -v 300 --special '<|endoftext|>' -o b.bpe b.txt 2>/dev/null &&
	bpe-learn -v 280 --special '<|endoftext|>' -o c.bpe a.txt 2>/dev/null
ok $? "three tokenizers: a, b (same size, other merges), c (smaller)"
bpe-encode -t a.bpe a.txt | shard-pack -o d --val-docs 10
M="-m tiny --vocab 300 --context 32 -n 3 -j 1 -d d"
run lm-train $M -o ck -t a.bpe
is "$rc" 0 "training with -t records the tokenizer ($err)"
run lm-train -c ck/latest --info
printf '%s\n' "$out" | grep -q '^tokenizer *{"crc32c":"[0-9a-f]\{8\}","vocab":300,"eot":[0-9]*,"specials":\["<|endoftext|>"\]}$'
ok $? "--info shows it ($(printf '%s\n' "$out" | grep '^tokenizer'))"
run lm-sample -c ck/latest -t a.bpe --max-tokens 4 -j 1 "The "
is "$rc" 0 "lm-sample with the checkpoint's tokenizer ($err)"
run lm-sample -c ck/latest -t b.bpe --max-tokens 4 -j 1 "The "
is "$rc" 1 "lm-sample with another tokenizer of the same size: exit 1"
case $err in "lm-sample: b.bpe (identity "*") is not the tokenizer of ck/latest (identity "*")") ok 0 "message: $err" ;;
	*) ok 1 "message: $err" ;; esac
[ -z "$out" ]; ok $? "and no garbage on stdout"
run lm-train -c ck/latest --val d-val -t b.bpe -j 1
is "$rc" 1 "evaluation with another tokenizer: exit 1 ($err)"
run lm-train $M -o ck2 -t c.bpe
is "$rc" 1 "training with a tokenizer that is not the shards': exit 1 ($err)"

# Without -t, the shards' vocabulary size is recorded and checked.
run lm-train $M -o ck3
is "$rc" 0 "training without -t"
run lm-sample -c ck3/latest -t c.bpe --max-tokens 4 -j 1 "The "
is "$rc" 1 "lm-sample with a tokenizer of another size: exit 1"
is "$err" "lm-sample: c.bpe has 280 tokens, the tokenizer of ck3/latest had 300: not its tokenizer" "its message"
run lm-train $M -o ck3 --resume -n 4 -t b.bpe
is "$rc" 0 "resuming without a recorded CRC takes -t ($err)"
run lm-train $M -o ck3 --resume -n 5 -t a.bpe
is "$rc" 1 "then another tokenizer on resume: exit 1 ($err)"
done_testing
