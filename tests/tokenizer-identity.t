#!/bin/sh
# tests/tokenizer-identity.t: a checkpoint records its tokenizer's identity
# (lm-train -t: CRC-32C of ids, merges and specials, vocabulary size; else
# what the shards record: the identity bpe-encode wrote into the token stream
# and shard-pack into the shards, or only their vocabulary size), and
# lm-sample, lm-train and its evaluation refuse another tokenizer instead of
# printing garbage (issue 23 item 7).
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

# The shards name their tokenizer: another one of the same size is refused.
ok "$(od -An -tu1 -j4 -N1 d-000000.lms | tr -d ' ' | grep -qx 2; echo $?)" "bpe-encode | shard-pack: version 2 shards (with the identity)"
run lm-train $M -o ckb -t b.bpe
is "$rc" 1 "training with another tokenizer of the shards' size: exit 1"
case $err in "lm-train: b.bpe (identity "*") is not the tokenizer of the shards d (identity "*")") ok 0 "message: $err" ;;
	*) ok 1 "message: $err" ;; esac
run lm-train $M -o cks
is "$rc" 0 "training without -t records the shards' identity ($err)"
run lm-train -c cks/latest --info
printf '%s\n' "$out" | grep -q '^tokenizer *{"crc32c":"[0-9a-f]\{8\}","vocab":300,"eot":0}$'
ok $? "--info shows it ($(printf '%s\n' "$out" | grep '^tokenizer'))"
run lm-sample -c cks/latest -t b.bpe --max-tokens 4 -j 1 "The "
is "$rc:$out" "1:" "lm-sample on it with another tokenizer of the same size: exit 1, no output"
run lm-sample -c cks/latest -t a.bpe --max-tokens 4 -j 1 "The "
is "$rc" 0 "lm-sample with the shards' tokenizer ($err)"
bpe-encode -t b.bpe b.txt | shard-pack -o e --val-docs 10
run lm-train -c cks/latest --val e-val -j 1
is "$rc" 1 "evaluating on shards of another tokenizer: exit 1"
case $err in "lm-train: the shards e-val were made by another tokenizer"*) ok 0 "message: $err" ;;
	*) ok 1 "message: $err" ;; esac
run lm-train $M --val e-val -o ckv
is "$rc" 1 "training and validation shards of two tokenizers: exit 1 ($err)"
run lm-train $M -o cks --resume -n 4 -d e
is "$rc" 1 "resuming on shards of another tokenizer: exit 1 ($err)"
(bpe-encode -t a.bpe a.txt; bpe-encode -t b.bpe b.txt) | shard-pack -o f 2>err.txt
is "$?:$(ls f-* 2>/dev/null | wc -l | tr -d ' ')" "1:0" "shard-pack: streams of two tokenizers are refused, no shard"
grep -q 'concatenated stream made by another tokenizer' err.txt; ok $? "... saying so ($(cat err.txt))"
shard-pack -d d-000000.lms | shard-pack -o dd
cmp -s d-000000.lms dd-000000.lms; ok $? "shard-pack -d keeps the identity: repacked, the same shard"

# Shards without an identity (version 1, from an older bpe-encode or another
# tool: here a stream with a 16-byte header) are read as before.
perl "$LMPIPE_ROOT/tests/mktok.pl" 300 0 docs 200 40 1 | shard-pack -o old
ok "$(od -An -tu1 -j4 -N1 old-000000.lms | tr -d ' ' | grep -qx 1; echo $?)" "a stream without identity: version 1 shards"
run lm-train -m tiny --vocab 300 --context 32 -n 2 -j 1 -d old -o cko -t b.bpe
is "$rc" 0 "they train with any tokenizer of their size ($err)"

# Without -t, on shards without identity, their vocabulary size is recorded
# and checked.
O="-m tiny --vocab 300 --context 32 -j 1 -d old"
run lm-train $O -n 3 -o ck3
is "$rc" 0 "training without -t"
run lm-sample -c ck3/latest -t c.bpe --max-tokens 4 -j 1 "The "
is "$rc" 1 "lm-sample with a tokenizer of another size: exit 1"
is "$err" "lm-sample: c.bpe has 280 tokens, the tokenizer of ck3/latest had 300: not its tokenizer" "its message"
run lm-train $O -o ck3 --resume -n 4 -t b.bpe
is "$rc" 0 "resuming without a recorded CRC takes -t ($err)"
run lm-train $O -o ck3 --resume -n 5 -t a.bpe
is "$rc" 1 "then another tokenizer on resume: exit 1 ($err)"
done_testing
