#!/bin/sh
# tests/progress.t: --progress into a file (not a terminal) writes whole
# lines, counts as integers ("learning 12 merges / 144 (8%)", "training 20
# steps / 20 (100%)"), bytes in MB; no carriage returns or terminal codes.
. "$(dirname "$0")/lib.sh"
cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 2000 1 > text.txt
bpe-learn --progress -v 400 -o t.bpe text.txt 2> learn.err
ok $? "bpe-learn --progress runs"
grep -Eq '^bpe-learn: learning [0-9]+ merges / [0-9]+ \([0-9]+%\), [0-9.]+ merges/s' learn.err
ok $? "bpe-learn: merges counted in integers ($(grep learning learn.err | tail -1))"
grep -Eq '^bpe-learn: reading [0-9]+\.[0-9] MB' learn.err
ok $? "bpe-learn: bytes in MB"
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt | shard-pack -o d
lm-train -m tiny --vocab 256 --context 64 -d d -n 20 -j 1 --progress 2> train.err
ok $? "lm-train --progress runs"
is "$(tail -1 train.err | sed 's/, [0-9.]* steps\/s.*//')" "lm-train: training 20 steps / 20 (100%)" "lm-train: steps counted in integers"
is "$(cat learn.err train.err | tr -d '\n' | tr '\r\033' '##' | grep -c '#')" 0 "no carriage return or escape into a file"
done_testing
