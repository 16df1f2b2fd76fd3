#!/bin/sh
# bench/lm-train-gpu.sh: lm-train --device cuda beside the PyTorch reference
# (bench/torch_llama_gpu.py, eager and torch.compile) on the same GPU in the
# same call, on the issue's two configs:
#   ts     V=10000 T=256 d=512 L=4 H=16 d_ff=1344, batch 128
#   gpt2s  V=50304 T=1024 d=768 L=12 H=12 d_ff=2048, batch 32
# lmpipe trains on byte-level shards of a generated text (the speed does not
# depend on the tokens); its figure is the median tokens/s of the steps after
# WARMUP, from its own log.  One JSON line per measurement, then the ratio
# lmpipe / torch.compile per config.  Needs a GPU, python3 with torch.
#   STEPS=N (default 30) timed steps per run; CONFIGS="ts gpt2s";
#   REF=0 leaves PyTorch out (lmpipe's lines only, for runs set against each
#   other), REF_MODES="compile" leaves its eager run out; LMTRAIN_OPTS="..."
#   more lm-train options (e.g. "--optimizer muon --profile 8"), whose
#   messages (a profile's table) go to stderr.
set -eu
BIN=${LMPIPE_BIN:-$(dirname "$0")/../bin}
ROOT=${LMPIPE_ROOT:-$(dirname "$0")/..}
STEPS=${STEPS:-30}
WARMUP=5
CONFIGS=${CONFIGS:-"ts gpt2s"}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

perl "$ROOT/tests/mktext.pl" 100000 1 > "$TMP/t.txt"
perl "$ROOT/tests/bytes2tok.pl" < "$TMP/t.txt" | "$BIN/shard-pack" -o "$TMP/d"

for cfg in $CONFIGS; do
	case $cfg in
	ts) shape="10000 256 512 4 16 1344" batch=128 ;;
	gpt2s) shape="50304 1024 768 12 12 2048" batch=32 ;;
	*) echo "lm-train-gpu.sh: unknown config $cfg" >&2; exit 2 ;;
	esac
	set -- $shape
	"$BIN/lm-train" --device cuda --vocab "$1" --context "$2" --d-model "$3" --layers "$4" \
		--heads "$5" --d-ff "$6" -b $batch -n $((WARMUP + STEPS)) -d "$TMP/d" \
		--log "$TMP/$cfg.jsonl" ${LMTRAIN_OPTS:-} 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
	[ -z "${LMTRAIN_OPTS:-}" ] || cat "$TMP/err" >&2
	ours=$(sed -n 's/.*"step":\([0-9]*\),.*"tokens_per_s":\([0-9.]*\).*/\1 \2/p' "$TMP/$cfg.jsonl" |
		awk -v w=$WARMUP '$1 > w { print $2 }' | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
	mfu=$(python3 -c "
V,T,d,L,H,F=map(int,'$shape'.split()); m=L*(4*d*d+3*d*F)+V*d
print(round($ours*(6*m+6*L*T*d)/989e12,4))")
	peak=$(sed -n 's/.*"peak_device_bytes":\([0-9]*\).*/\1/p' "$TMP/$cfg.jsonl")
	echo "{\"config\":\"$cfg\",\"impl\":\"lmpipe\",\"tokens_per_s\":$ours,\"step_ms\":$(python3 -c "print(round($batch*$2/$ours*1e3,3))"),\"mfu\":$mfu,\"peak_gib\":$(python3 -c "print(round(${peak:-0}/2**30,2))")}"
	[ "${REF:-1}" = 0 ] && continue
	for mode in ${REF_MODES:-eager compile}; do
		python3 "$ROOT/bench/torch_llama_gpu.py" $mode $shape $batch "$STEPS" > "$TMP/$mode.json"
		sed "s/^{/{\"config\":\"$cfg\",/" "$TMP/$mode.json"
	done
	python3 -c "
import json, os
r={'config':'$cfg'}
for m in ('compile', 'eager'):
    f='$TMP/'+m+'.json'
    if os.path.exists(f):
        r['lmpipe_over_'+m]=round($ours/json.load(open(f))['tokens_per_s'],3)
print(json.dumps(r))"
done
