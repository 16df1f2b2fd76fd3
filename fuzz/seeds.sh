#!/bin/sh
# fuzz/seeds.sh BIN OUT: seed corpora for the harnesses, made by the
# programs in BIN: OUT/NAME/ for each harness fuzz/NAME.c.
set -eu
BIN=$1
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PATH=$BIN:$PATH
W=$(mktemp -d "${TMPDIR:-/tmp}/lmpipe-seeds.XXXXXX")
trap 'rm -rf "$W"' EXIT
for t in shard shard_set tokstream tokenizer gpt2 counts safetensors checkpoint prompts tasks rewards \
	rollouts pairs hf_tokenizer json_skim pretok docs_span; do
	mkdir -p "$OUT/$t"
done
cd "$W"
perl "$ROOT/tests/mktext.pl" 60 1 > text.txt
printf '%s<|endoftext|>%s' "$(head -c 300 text.txt)" "$(tail -c 300 text.txt)" > small.txt
# tokenizer, counts, GPT-2 files, token stream
bpe-learn -v 300 --special '<|endoftext|>' --counts-out c.counts -o t.tok small.txt
cp t.tok "$OUT/tokenizer/t.tok"
cp c.counts "$OUT/counts/c.counts"
bpe-encode --pretokenize --special '<|endoftext|>' -o "$OUT/pretok/p.pre" small.txt
bpe-learn --gpt2-out g -v 280 small.txt
{ cat g/vocab.json; printf "\\0"; cat g/merges.txt; } > "$OUT/gpt2/g.bin"
bpe-encode -t t.tok small.txt > s.tok
cp s.tok "$OUT/tokstream/s.tok"
# a range read: two bytes placing the range, then the file (separators in it)
{ printf '\003\377'; cat small.txt; } > "$OUT/docs_span/s.txt"
# shards (several frames) and their manifest
shard-pack -o d --shard-tokens 200 --frame-tokens 64 --val-docs 1 < s.tok
cp d-000000.lms "$OUT/shard/d0.lms"
cp d-val-000000.lms "$OUT/shard/dv.lms"
cp d.manifest "$OUT/shard_set/d.manifest"
# a small checkpoint (and so a safetensors file)
perl "$ROOT/tests/bytes2tok.pl" < text.txt > b.tok
shard-pack -o bd < b.tok
lm-train --vocab 256 --context 16 --d-model 16 --layers 1 --heads 2 --d-ff 32 -b 2 -n 1 \
	-d bd -o ck -j 1 2>/dev/null
cp ck/step-00000001.safetensors "$OUT/checkpoint/ck.safetensors"
cp ck/step-00000001.safetensors "$OUT/safetensors/ck.safetensors"
# rollouts: sampled from that checkpoint (a byte tokenizer fits its 256 ids), scored
bpe-learn -v 256 -o b.bpe text.txt
printf '%s\n' '{"prompt":"2+3=","answer":"5","group":0}' '{"prompt":"1+1=","answer":"2","group":1}' > ap.jsonl
lm-sample -c ck/latest -t b.bpe --jsonl -i ap.jsonl -n 2 --max-tokens 6 -j 1 | rl-reward -r last-number \
	> "$OUT/rollouts/r.jsonl"
cp "$OUT/rollouts/r.jsonl" "$OUT/json_skim/r.jsonl"
# SFT records (lm-task --response) and DPO preference pairs
lm-task arith -n 2 --seed 1 -r > "$OUT/pairs/sft.jsonl"
printf '%s\n' '{"prompt":"The cat","chosen":" sat on the mat.","rejected":" 2+3=5"}' \
	'{"prompt":"","chosen":"The","rejected":""}' > "$OUT/pairs/dpo.jsonl"
# a Hugging Face tokenizer.json with merges: exported with a model of t.tok's vocabulary
lm-train --vocab 300 --context 8 --d-model 16 --layers 1 --heads 2 --d-ff 32 -b 2 -n 1 \
	-d d -o ck300 -j 1 -t t.tok 2>/dev/null
lm-train -c ck300/latest -t t.tok --export-hf hf 2>/dev/null
cp hf/tokenizer.json "$OUT/hf_tokenizer/tokenizer.json"
# JSON Lines: prompts, tasks, rollouts
printf '%s\n' '{"prompt":"Max saw a","id":"a"}' '{"prompt":"Sam","group":2}' > "$OUT/prompts/p.jsonl"
printf '%s\n' '{"question":"What is 2+3?","answer":"2+3=5\n#### 5"}' > "$OUT/tasks/g.jsonl"
lm-task arith -n 3 --seed 1 > "$OUT/tasks/arith.jsonl"
printf '%s\n' '{"completion":" 2+3=5 </think> <answer> 5 </answer>","answer":"5","group":0}' \
	'{"completion":"the answer is 7","answer":7,"group":0}' > "$OUT/rewards/r.jsonl"
