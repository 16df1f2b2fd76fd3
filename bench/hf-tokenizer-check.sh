#!/bin/sh
# bench/hf-tokenizer-check.sh: the Hugging Face export with its tokenizer,
# checked with transformers (issue 23 item 8; run it on the GPU machine,
# where transformers is installed): learn a BPE with <|endoftext|>, train a
# few steps, export with lm-train --export-hf -t, then
# bench/hf_tokenizer_check.py loads AutoTokenizer and AutoModelForCausalLM
# from the directory, checks that the tokenizer's ids equal bpe-encode's on
# a held-out text (specials included) and that decode() gives the text
# back, and that generate() runs and stops at the exported eos id.
# Prints JSON lines; exits 1 on a mismatch.  Needs python3 with torch and
# transformers.
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
PYTHON=${PYTHON:-python3}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hf-tok.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
perl "$ROOT/tests/mktext.pl" 4000 5 | awk '{ print } NR % 10 == 0 { print "<|endoftext|>" }' > "$TMP/corpus.txt"
perl "$ROOT/tests/mktext.pl" 50 9 | awk '{ print } NR % 7 == 0 { print "<|endoftext|>" }' > "$TMP/held.txt"
printf 'caf\303\251 \342\202\254 tabs\tand  spaces\n\n<|endoftext|>x\n' >> "$TMP/held.txt"
"$BIN/bpe-learn" -v 600 --special '<|endoftext|>' -o "$TMP/tok.bpe" "$TMP/corpus.txt" 2>/dev/null
"$BIN/bpe-encode" -t "$TMP/tok.bpe" "$TMP/corpus.txt" | "$BIN/shard-pack" -o "$TMP/d"
"$BIN/lm-train" -m tiny --vocab 600 --context 64 -b 8 -n 30 --lr 1e-2 -d "$TMP/d" -t "$TMP/tok.bpe" \
	-o "$TMP/ck" 2>/dev/null
"$BIN/lm-train" -c "$TMP/ck/latest" --export-hf "$TMP/hf" -t "$TMP/tok.bpe"
"$BIN/bpe-encode" -t "$TMP/tok.bpe" --text "$TMP/held.txt" | tr '\n' ' ' > "$TMP/ids.txt"
"$PYTHON" "$ROOT/bench/hf_tokenizer_check.py" "$TMP/hf" "$TMP/held.txt" "$TMP/ids.txt"
