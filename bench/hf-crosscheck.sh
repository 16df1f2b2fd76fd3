#!/bin/sh
# bench/hf-crosscheck.sh: lm-train checkpoints against Hugging Face
# transformers: for three shapes (untied, tied, and the s5m benchmark model
# at its full context of 256) train a few steps, export with --export-hf,
# dump lm-train's logits on random ids, and compare with
# AutoModelForCausalLM's (bench/hf_crosscheck.py; max abs diff < 1e-4).
# Needs python3 with torch, transformers and safetensors.
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
PYTHON=${PYTHON:-python3}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hf-check.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
perl "$ROOT/tests/mktext.pl" 4000 5 | perl "$ROOT/tests/bytes2tok.pl" > "$TMP/t.tok"
"$BIN/shard-pack" -o "$TMP/d" < "$TMP/t.tok"
fail=0
check() { # check NAME T LM-TRAIN-OPTION...
	name=$1 t=$2; shift 2
	"$BIN/lm-train" "$@" -b 4 -n 5 --lr 1e-2 -d "$TMP/d" -o "$TMP/$name"
	"$BIN/lm-train" -c "$TMP/$name/latest" --export-hf "$TMP/$name.hf"
	perl -e 'srand(7); for (1 .. 3) { print join(" ", map { int(rand(256)) } 1 .. $ARGV[0]), "\n" }' "$t" > "$TMP/ids.txt"
	"$BIN/lm-train" -c "$TMP/$name/latest" --ids "$TMP/ids.txt" --dump-logits "$TMP/$name.logits"
	"$PYTHON" "$ROOT/bench/hf_crosscheck.py" "$TMP/$name.hf" "$TMP/$name.logits" || fail=1
}
check untied 64 -m tiny --vocab 256 --context 64 --d-model 64 --heads 4 --d-ff 172
check tied 64 -m tiny --vocab 256 --context 64 --d-model 64 --heads 4 --d-ff 172 --tie-embeddings --rope-theta 500
check s5m 256 -m s5m
exit $fail
