#!/usr/bin/env bash
# bench/bpe-learn.sh: bpe-learn against Hugging Face tokenizers' BpeTrainer
# (ByteLevel pre-tokenizer, same special token), measured in the same run.
# One JSON line per measurement: wall seconds and peak RSS of each (each
# run in a process of its own), and the ratios.
#   BENCH_TEXT   big text (default: first 50 MB of corpus/gutenberg_train.txt)
#   BENCH_SMALL  CS336 corpus.en (vocab 500)
#   BENCH_VOCABS BENCH_THREADS  lists (default "10000 32000" and "16 2")
set -euo pipefail
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
DATA=${LMPIPE_DATA:-$ROOT/../shared/data}
SMALL=${BENCH_SMALL:-$DATA/cs336-a1/fixtures/corpus.en}
VOCABS=${BENCH_VOCABS:-10000 32000}
THREADS=${BENCH_THREADS:-16 2}
EOT='<|endoftext|>'
W=$(mktemp -d "${TMPDIR:-/tmp}/bench-bpe.XXXXXX")
trap 'rm -rf "$W"' EXIT
TEXT=${BENCH_TEXT:-}
if [ -z "$TEXT" ]; then
	TEXT=$W/gutenberg-50MB.txt
	head -c 50000000 "$DATA/corpus/gutenberg_train.txt" > "$TEXT"
fi
cat "$TEXT" "$SMALL" > /dev/null # page cache
"$BIN/bpe-learn" -v 300 -o "$W/warm.tok" "$SMALL" # and the program's own pages

# measure NAME CMD...: prints "seconds peak_rss_MB" of CMD run as a child
measure() {
	python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
dt = time.perf_counter() - t
if r.returncode:
    sys.exit(f"failed ({r.returncode}): {' '.join(sys.argv[1:])}")
print(f"{dt:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.1f}")
PY
}

cat > "$W/hf.py" <<'PY'
import os, sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
path, vocab = sys.argv[1], int(sys.argv[2])
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False)
tok.train([path], trainer)
PY
have_hf=0
python3 -c 'import tokenizers' 2>/dev/null && have_hf=1

line() { # line INPUT VOCAB THREADS OURS HF
	local ours_s ours_m hf_s hf_m
	read -r ours_s ours_m <<<"$4"
	if [ -n "$5" ]; then
		read -r hf_s hf_m <<<"$5"
		awk -v i="$1" -v v="$2" -v j="$3" -v os="$ours_s" -v om="$ours_m" -v hs="$hf_s" -v hm="$hf_m" 'BEGIN {
			printf "{\"bench\":\"bpe-learn\",\"input\":\"%s\",\"vocab\":%d,\"threads\":%d,\"ours_s\":%s,\"ours_rss_mb\":%s,\"hf_tokenizers_s\":%s,\"hf_tokenizers_rss_mb\":%s,\"speedup\":%.2f,\"rss_ratio\":%.2f}\n", i, v, j, os, om, hs, hm, hs / os, om / hm }'
	else
		printf '{"bench":"bpe-learn","input":"%s","vocab":%d,"threads":%d,"ours_s":%s,"ours_rss_mb":%s,"hf_tokenizers":null}\n' \
			"$1" "$2" "$3" "$ours_s" "$ours_m"
	fi
}

for v in $VOCABS; do
	for j in $THREADS; do
		ours=$(measure "$BIN/bpe-learn" -j"$j" -v "$v" --special "$EOT" -o "$W/ours.tok" "$TEXT")
		hf=""
		[ $have_hf = 1 ] && hf=$(RAYON_NUM_THREADS=$j measure python3 "$W/hf.py" "$TEXT" "$v")
		line "$(basename "$TEXT")" "$v" "$j" "$ours" "$hf"
	done
done
j=$(nproc)
ours=$(measure "$BIN/bpe-learn" -v 500 --special "$EOT" -o "$W/small.tok" "$SMALL")
hf=""
[ $have_hf = 1 ] && hf=$(RAYON_NUM_THREADS=$j measure python3 "$W/hf.py" "$SMALL" 500)
line corpus.en 500 "$j" "$ours" "$hf"
