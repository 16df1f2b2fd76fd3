#!/bin/sh
# bench/speedrun.sh: the learn-ts recipe (bench/learn-ts.sh: a byte-level
# BPE of 10000 on the Gutenberg training text, the ts shape at batch 128,
# warmup 200, cosine to 10 % at STEPS, clip 1.0, validation on all of the
# validation text) raced with AdamW and with Muon, lm-train --device cuda
# beside the PyTorch reference (bench/torch_speedrun.py: torch.compile, bf16,
# fused AdamW; torch.optim.Muon on the blocks' matrices) in the same call
# on the same tokens.  The issue's target: lmpipe Muon <= 1.415 validation
# bits/byte within 6000 steps and 60 s of training, met (1.4131 in 57.0 s,
# bench/lm-train-gpu-notes.md) by STEPS=5500 EVAL=1100 OPTS=muon
# EXTRA="--schedule wsd --decay-frac 0.5 --decay-shape sqrt --lr-min-ratio 0 --lr 4e-3".
#
#   AdamW: lr 2e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1 (matrices).
#   Muon:  lr MUON_LR (0.02), momentum 0.95, Nesterov, 5 Newton-Schulz steps,
#          scale original, weight decay MUON_WD (0.1, torch's default) on
#          q, k, v, o, gate, up, down; the AdamW above on embedding, head and
#          gains.
#
# Prints one JSON line per evaluation (impl, optimizer, step, train_s: the
# seconds in training steps, evaluations excluded; nats/token; bits/byte),
# then per lmpipe optimizer the cost of its optimizer step from
# lm-train --profile (PROFILE steps): the AdamW and Muon rows' ms per step
# and their share of the step, and the same timed by CUDA events in torch.
#
#   EXTRA="..." more lm-train options for lmpipe's runs only (a schedule, a
#   variant: EXTRA="--schedule wsd --decay-frac 0.5 --decay-shape sqrt
#   --lr-min-ratio 0"; the PyTorch reference keeps the recipe's cosine),
#   IMPLS="lmpipe torch" (either alone for a shorter run), OPTS="adamw muon",
#   STEPS (6000), EVAL (1000), BATCH (128), MUON_LR, MUON_WD, PROFILE (30), DEVICE (cuda),
#   CORPUS=DIR (gutenberg_{train,valid}.txt or .xz; default
#   ../shared/data/corpus), W=DIR work folder.
# The whole of it takes about 8 minutes on one H200 (each lmpipe run about
# 2 minutes at 6000 steps, PyTorch AdamW 70 s, PyTorch Muon 135 s, plus
# compilation and evaluations); STEPS=2000 or IMPLS=lmpipe for less.
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
CORPUS=${CORPUS:-$ROOT/../shared/data/corpus}
IMPLS=${IMPLS:-"lmpipe torch"} OPTS=${OPTS:-"adamw muon"}
STEPS=${STEPS:-6000} EVAL=${EVAL:-1000} BATCH=${BATCH:-128} PROFILE=${PROFILE:-30} DEVICE=${DEVICE:-cuda}
MUON_LR=${MUON_LR:-0.02} MUON_WD=${MUON_WD:-0.1}
export BATCH MUON_LR MUON_WD
W=${W:-$(mktemp -d "${TMPDIR:-/tmp}/speedrun.XXXXXX")}
mkdir -p "$W"
text() { # text NAME: the corpus file, decompressed from .xz if needed
	if [ -f "$CORPUS/$1" ]; then echo "$CORPUS/$1"; return; fi
	[ -f "$W/$1" ] || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
		"$CORPUS/$1.xz" "$W/$1"
	echo "$W/$1"
}
train=$(text gutenberg_train.txt) valid=$(text gutenberg_valid.txt)
[ -f "$W/tok.bpe" ] || "$BIN/bpe-learn" --vocab-size 10000 --special '<|endoftext|>' -o "$W/tok.bpe" "$train"
for part in train valid; do
	src=$train; [ $part = valid ] && src=$valid
	[ -f "$W/$part.tok" ] || "$BIN/bpe-encode" -t "$W/tok.bpe" -o "$W/$part.tok" "$src"
	[ -f "$W/$part.manifest" ] || "$BIN/shard-pack" -f -j 4 -o "$W/$part" < "$W/$part.tok"
done
vtok=$("$BIN/shard-pack" -l "$W"/valid-0*.lms | awk '$NF ~ /\.lms$/ { s += $1 } END { print s }')
vbytes=$(wc -c < "$valid")
echo "{\"valid_tokens\":$vtok,\"valid_bytes\":$vbytes,\"steps\":$STEPS,\"batch\":$BATCH}"

lm_opts() { # the optimizer options of lm-train for $1
	if [ "$1" = muon ]; then
		echo "--optimizer muon --muon-lr $MUON_LR --muon-momentum 0.95 --muon-weight-decay $MUON_WD --muon-scale original"
	else
		echo "--optimizer adamw"
	fi
}

for impl in $IMPLS; do
	for opt in $OPTS; do
		case $impl in
		lmpipe)
			# shellcheck disable=SC2046,SC2086
			"$BIN/lm-train" --device "$DEVICE" -m ts -b "$BATCH" -n "$STEPS" --lr 2e-3 --lr-min-ratio 0.1 \
				--warmup 200 --beta1 0.9 --beta2 0.95 --weight-decay 0.1 --eps 1e-8 --clip 1.0 \
				$(lm_opts $opt) ${EXTRA:-} -d "$W/train" --val "$W/valid" --eval-every "$EVAL" --eval-batches 0 \
				--log "$W/$opt.jsonl"
			awk -v vt="$vtok" -v vb="$vbytes" -v opt="$opt" '
				/"train_s"/ { match($0, /"train_s":[0-9.]+/); ts = substr($0, RSTART + 10, RLENGTH - 10) }
				/"val_loss"/ { match($0, /"step":[0-9]+/); st = substr($0, RSTART + 7, RLENGTH - 7)
					match($0, /"val_loss":[0-9.e+-]+/); vl = substr($0, RSTART + 11, RLENGTH - 11)
					printf "{\"impl\":\"lmpipe\",\"optimizer\":\"%s\",\"step\":%d,\"train_s\":%.1f,\"val_nats_per_token\":%.4f,\"val_bits_per_byte\":%.4f}\n",
						opt, st, ts, vl, vl * vt / vb / log(2) }' "$W/$opt.jsonl"
			# shellcheck disable=SC2046,SC2086
			"$BIN/lm-train" --device "$DEVICE" -m ts -b "$BATCH" -n $((PROFILE + 1)) --lr 2e-3 --warmup 200 \
				$(lm_opts $opt) ${EXTRA:-} -d "$W/train" --profile "$PROFILE" 2> "$W/$opt.profile"
			awk -v opt="$opt" '
				/ms a step/ { for (i = 1; i <= NF; i++) if ($i == "ms" && $(i + 1) == "a") step = $(i - 1) }
				$1 == "AdamW" { adamw = $3; n = $2 } $1 == "Muon" { muon = $3 }
				END { steps = '"$PROFILE"'; printf "{\"impl\":\"lmpipe\",\"optimizer\":\"%s\",\"step_ms\":%s,\"adamw_ms\":%.3f,\"muon_ms\":%.3f,\"muon_share\":%.4f}\n",
					opt, step, adamw / steps, muon / steps, (step > 0 ? muon / steps / step : 0) }' "$W/$opt.profile"
			;;
		torch)
			python3 "$ROOT/bench/torch_speedrun.py" "$opt" "$W/train.tok" "$W/valid.tok" "$vbytes" \
				"$STEPS" "$EVAL"
			;;
		*) echo "speedrun.sh: unknown impl $impl" >&2; exit 2 ;;
		esac
	done
done
