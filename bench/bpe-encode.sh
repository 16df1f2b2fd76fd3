#!/bin/sh
# bench/bpe-encode.sh: bpe-encode against tiktoken and HF tokenizers on the
# first 50 MB of the Gutenberg corpus, GPT-2 vocabulary, 1 and 16 threads;
# one JSON line per measurement (see bench/bpe_encode_ref.py).
#
# Environment: LMPIPE_BIN (programs), LMPIPE_DATA (../shared/data), or
# BENCH_TEXT (a text file, used whole) and BENCH_GPT2 (a folder holding
# gpt2_vocab.json and gpt2_merges.txt); BENCH_THREADS (16), BENCH_REPS (3),
# BENCH_MB (50).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${LMPIPE_BIN:-$here/../bin}
data=${LMPIPE_DATA:-$here/../../shared/data}
gpt2=${BENCH_GPT2:-$data/cs336-a1/fixtures}
threads=${BENCH_THREADS:-16}
reps=${BENCH_REPS:-3}
mb=${BENCH_MB:-50}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-bpe.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ -n "${BENCH_TEXT:-}" ]; then
	text=$BENCH_TEXT
else
	# the first $mb MB, cut after the last newline so the text stays UTF-8
	head -c $((mb * 1000000)) "$data/corpus/gutenberg_train.txt" | sed '$d' >"$tmp/text.txt"
	text=$tmp/text.txt
fi
"$bin/bpe-encode" --vocab "$gpt2/gpt2_vocab.json" --merges "$gpt2/gpt2_merges.txt" \
	--save-tokenizer "$tmp/gpt2.tok" </dev/null >/dev/null
python3 "$here/bpe_encode_ref.py" "$bin/bpe-encode" "$tmp/gpt2.tok" "$gpt2" "$text" "$threads" "$reps"
