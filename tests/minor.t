#!/bin/sh
# tests/minor.t: issue 22's minor items: --log on a full disk names the
# reason, --export-hf to a full disk leaves neither file, and a resume does
# not repeat the metrics log's records of the steps it redoes.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
perl "$LMPIPE_ROOT/tests/mktext.pl" 300 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d < text.tok
T() { lm-train -m tiny --vocab 256 --context 32 -b 4 --lr 1e-2 --warmup 2 -d d -j 1 "$@"; }

# a file size limit stands in for a full disk (SIGXFSZ ignored: EFBIG)
( trap '' XFSZ; ulimit -f 2; T -n 40 --log big.jsonl ) 2>err.txt
is "$?" 1 "--log on a full disk: exit 1"
is "$(cat err.txt)" "lm-train: big.jsonl: write error: File too large" "the reason is named"

T -n 2 -o ck 2>/dev/null
( trap '' XFSZ; ulimit -f 100; lm-train -c ck/latest --export-hf hf ) 2>err.txt
is "$?" 1 "--export-hf to a full disk: exit 1 ($(cat err.txt))"
[ ! -e hf/config.json ] && [ ! -e hf/model.safetensors ]
ok $? "neither config.json nor model.safetensors is left"
lm-train -c ck/latest --export-hf hf2 2>/dev/null && [ -s hf2/config.json ] && [ -s hf2/model.safetensors ]
ok $? "without the limit both are written"

T -n 20 -o r --ckpt-every 10 --log run.jsonl 2>/dev/null
cp run.jsonl full.jsonl
ln -sf step-00000010.safetensors r/latest
T -n 20 -o r --ckpt-every 10 --log run.jsonl --resume 2>/dev/null
ok $? "resume from step 10 (the log already holds steps 11 to 20)"
is "$(grep -c '"step":15,' run.jsonl)" 1 "each step's record appears once"
strip() { grep -v '"device"' "$@" | sed 's/,"tokens_per_s[^}]*//'; }
strip full.jsonl > want.txt; strip run.jsonl > got.txt
cmp -s want.txt got.txt; ok $? "the log equals the uninterrupted run's"
done_testing
