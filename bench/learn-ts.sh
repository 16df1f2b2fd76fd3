#!/bin/sh
# bench/learn-ts.sh: the learn-ts recipe end to end on one GPU (the CUDA
# backend issue's reference): a byte-level BPE of 10000 tokens with the
# special <|endoftext|> learned on the Gutenberg training text; lm-train
# --device cuda of the ts shape (V=10000 T=256 d=512 L=4 H=16 d_ff=1344,
# untied) at batch 128 x 256, AdamW lr 2e-3, betas 0.9/0.95, weight decay
# 0.1, eps 1e-8, warmup 200, cosine to 10 % at STEPS (12000), clip 1.0; the
# validation loss on all of the validation text every EVAL (2000) steps.
# Prints one JSON line per evaluation: step, seconds of training so far
# (train_s: the steps alone, as the recipe's PyTorch figure counts them)
# and of training and evaluations (elapsed_s), nats/token and bits/byte
# (nats/token x validation tokens / validation bytes / ln 2), then the
# time of each stage.
#
#   CORPUS=DIR  holds gutenberg_train.txt and gutenberg_valid.txt, or their
#               .xz copies (default ../shared/data/corpus); W=DIR work folder;
#   STEPS, EVAL, BATCH (128), DEVICE (cuda) for smaller runs;
#   LMTRAIN_OPTS="..."  more lm-train options for the training run (e.g.
#               --residual bf16, to set its curve beside the default's);
#   TOKENIZER=FILE  a tokenizer to use instead of learning one (an lmpipe
#               tokenizer file or a Hugging Face tokenizer.json), to compare
#               tokenizers on the recipe;
#   EVAL_STRIDES="128 32"  after training, the final checkpoint evaluated on
#               the validation text again with each of these sliding-window
#               strides (lm-train --eval-stride), beside the recipe's own
#               windows (stride 256), one JSON line each: whether the
#               recipe's reference figure was measured with longer contexts.
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
CORPUS=${CORPUS:-$ROOT/../shared/data/corpus}
STEPS=${STEPS:-12000} EVAL=${EVAL:-2000} DEVICE=${DEVICE:-cuda} BATCH=${BATCH:-128}
W=${W:-$(mktemp -d "${TMPDIR:-/tmp}/learn-ts.XXXXXX")}
mkdir -p "$W"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
text() { # text NAME: the corpus file, decompressed from .xz if needed
	if [ -f "$CORPUS/$1" ]; then echo "$CORPUS/$1"; return; fi
	[ -f "$W/$1" ] || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
		"$CORPUS/$1.xz" "$W/$1"
	echo "$W/$1"
}
t0=$(now)
train=$(text gutenberg_train.txt) valid=$(text gutenberg_valid.txt)
t1=$(now)
if [ -n "${TOKENIZER:-}" ]; then
	tok=$TOKENIZER
else
	tok=$W/tok.bpe
	"$BIN/bpe-learn" --vocab-size 10000 --special '<|endoftext|>' -o "$tok" "$train"
fi
t2=$(now)
"$BIN/bpe-encode" -t "$tok" "$train" | "$BIN/shard-pack" -f -j 4 -o "$W/train"
"$BIN/bpe-encode" -t "$tok" "$valid" | "$BIN/shard-pack" -f -j 4 -o "$W/valid"
t3=$(now)
vtok=$("$BIN/shard-pack" -l "$W"/valid-0*.lms | awk '$NF ~ /\.lms$/ { s += $1 } END { print s }')
vbytes=$(wc -c < "$valid")
"$BIN/lm-train" --device "$DEVICE" -m ts -b "$BATCH" -n "$STEPS" --lr 2e-3 --lr-min-ratio 0.1 --warmup 200 \
	--beta1 0.9 --beta2 0.95 --weight-decay 0.1 --eps 1e-8 --clip 1.0 \
	-d "$W/train" --val "$W/valid" --eval-every "$EVAL" --eval-batches 0 \
	--log "$W/train.jsonl" ${EVAL_STRIDES:+-o "$W/ck" --force} ${LMTRAIN_OPTS:-}
t4=$(now)
awk -v vt="$vtok" -v vb="$vbytes" '
	/"elapsed_s"/ { match($0, /"elapsed_s":[0-9.]+/); el = substr($0, RSTART + 12, RLENGTH - 12)
		match($0, /"train_s":[0-9.]+/); tr = substr($0, RSTART + 10, RLENGTH - 10) }
	/"val_loss"/ { match($0, /"step":[0-9]+/); st = substr($0, RSTART + 7, RLENGTH - 7)
		match($0, /"val_loss":[0-9.e+-]+/); vl = substr($0, RSTART + 11, RLENGTH - 11)
		printf "{\"step\":%d,\"train_s\":%.1f,\"elapsed_s\":%.1f,\"val_nats_per_token\":%.4f,\"val_bits_per_byte\":%.4f}\n",
			st, tr, el, vl, vl * vt / vb / log(2) }' "$W/train.jsonl"
for s in ${EVAL_STRIDES:+256 $EVAL_STRIDES}; do
	"$BIN/lm-train" --device "$DEVICE" -c "$W/ck/latest" --val "$W/valid" -t "$tok" -b "$BATCH" \
		--eval-stride "$s" | sed "s/^{/{\"eval_stride\":$s,/"
done
echo "{\"valid_tokens\":$vtok,\"valid_bytes\":$vbytes,\"stages_s\":{\"unpack\":$(secs $t0 $t1),\"bpe_learn\":$(secs $t1 $t2),\"encode_pack\":$(secs $t2 $t3),\"train_and_eval\":$(secs $t3 $t4)}}"
