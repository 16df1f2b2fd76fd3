#!/usr/bin/env bash
# bench/data-pipeline.sh: pipelines/data.mk from text to a tokenizer and shards
# on J = 1, 2, 4, 8, 16 cores (make -j J, and J threads to load the counts),
# beside Hugging Face tokenizers (BpeTrainer, then encode_batch on the same
# documents, on all cores) in the same call.  One JSON line per
# measurement: wall seconds per stage (the pipeline's own summary lines: plan,
# counts, tokenizer, shards, manifest; other_s is the rest: make and the
# scripts around the stages) and in all, the speed-up over -j 1 of each stage
# and in all, whether the output is byte-identical to -j 1's; inside the
# tokenizer stage (bpe-learn's LMPIPE_BPE_TIMES line): load_s reads and sums
# the counts files, then setup_s, pairs_s (the first count of every pair),
# merges_s and write_s; after the last -j, the tokenizer alone from its counts
# at each LMPIPE_BPE_PAR_WORDS of BENCH_PAR_WORDS (one line each, with whether
# the tokenizer is the same); then HF's train and encode seconds and the ratio
# to our fastest run.  Each -j runs for each PRE of BENCH_PRE (1: the text
# pre-tokenized once, in the counts tasks; 0: again in the shards stage), the
# speed-up over -j 1 of the same PRE, identical_to_j1 against the very first
# run; cpu_s is the user and system seconds of the run (cpu_s / total_s: the
# cores it kept busy; -j 1 keeps more than one busy where a piece's programs
# run side by side in a pipe).
#   bench/data-pipeline.sh                 # on the GPU machine: -j 1 2 4 8 16 and HF
#   BENCH_TEXT   the corpus (default: corpus/gutenberg_train.txt of the shared
#                data, else BENCH_XZ decompressed into a temporary folder)
#   BENCH_XZ     its xz file (default .devdata/gutenberg_train.txt.xz; python3's
#                lzma decompresses it where there is no xz program)
#   BENCH_JOBS   make -j values (default "1 2 4 8 16")
#   BENCH_VOCAB  (default 10000)   BENCH_PIECE  PIECE_BYTES (default 4Mi)
#   BENCH_PAR_WORDS  LMPIPE_BPE_PAR_WORDS values for the tokenizer alone
#                (default "131072 16384 1024"; "" for none)
#   BENCH_PRE    data.mk PRE values (default "1 0")
#   BENCH_HF     0 to leave Hugging Face out (default: run it when importable)
#   BENCH_REPS   runs of each -j (default 3), each from nothing: the line is the
#                run of median total time's, runs_s lists every run's total,
#                identical_to_j1 holds for all of them
set -euo pipefail
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
DATA=${LMPIPE_DATA:-$ROOT/../shared/data}
JOBS=${BENCH_JOBS:-1 2 4 8 16}
PRES=${BENCH_PRE:-1 0}
PAR_WORDS=${BENCH_PAR_WORDS-131072 16384 1024}
VOCAB=${BENCH_VOCAB:-10000}
PIECE=${BENCH_PIECE:-4Mi}
REPS=${BENCH_REPS:-3}
XZ=${BENCH_XZ:-$ROOT/.devdata/gutenberg_train.txt.xz}
W=$(mktemp -d "${TMPDIR:-/tmp}/bench-data.XXXXXX")
trap 'rm -rf "$W"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL

TEXT=${BENCH_TEXT:-}
if [ -z "$TEXT" ] && [ -r "$DATA/corpus/gutenberg_train.txt" ]; then
	TEXT=$DATA/corpus/gutenberg_train.txt
elif [ -z "$TEXT" ]; then
	[ -r "$XZ" ] || { echo "data-pipeline.sh: no corpus: set BENCH_TEXT, or put the xz file at $XZ" >&2; exit 1; }
	TEXT=$W/$(basename "$XZ" .xz)
	python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
		"$XZ" "$TEXT"
fi
cat "$TEXT" > /dev/null # page cache
name=$(basename "$TEXT")
bytes=$(stat -L -c %s "$TEXT")

now() { date +%s.%N; }
stage_s() { sed -n "s/^data.mk: $1: .*, \([0-9.]*\) s$/\1/p" "$2"; }
# $(learn_s PART LOG): PART's seconds on the tokenizer's LMPIPE_BPE_TIMES line
learn_s() { grep '^bpe-learn: times: load' "$2" | tail -1 | sed -n "s/.* $1 \([0-9.]*\) s.*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# user + system seconds of this shell's finished children so far (bash's
# times, run in this shell: a command substitution would be a new process)
child_cpu() {
	times > "$W/times"
	tail -1 "$W/times" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] }
		printf "%.3f", s }'
}
digest() { (cd "$1" && find tok.bpe manifest.tsv shards -type f | LC_ALL=C sort | xargs sha256sum | sha256sum); }

best=""
for pre in $PRES; do
unset total1
for j in $JOBS; do
	# REPS runs from nothing; the one of median total time is reported
	runs="" same=1
	for r in $(seq "$REPS"); do
		ro=$W/p${pre}j${j}r$r
		child_cpu > "$W/c0"
		t0=$(now)
		LMPIPE_BPE_TIMES=1 make -s -f "$ROOT/pipelines/data.mk" -j "$j" BIN="$BIN" W="$ro" INPUTS="$TEXT" \
			VOCAB="$VOCAB" PIECE_BYTES="$PIECE" THREADS=1 MERGE_THREADS="$j" PRE="$pre" 2> "$ro.log" ||
			{ sed 's/^/data-pipeline.sh: /' "$ro.log" >&2; exit 1; }
		t1=$(now)
		child_cpu > "$W/c1"
		awk -v a="$(cat "$W/c0")" -v b="$(cat "$W/c1")" 'BEGIN { printf "%.3f", b - a }' > "$ro.cpu"
		rd=$(digest "$ro")
		[ -n "${d1:-}" ] || d1=$rd
		[ "$rd" = "$d1" ] || same=0
		runs="$runs $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $r"
	done
	mid=$(echo "$runs" | xargs -n 2 | sort -n | sed -n "$(( (REPS + 1) / 2 ))p" | cut -d' ' -f2)
	out=$W/p${pre}j${j}r$mid
	cpu=$(cat "$out.cpu")
	runs_s=$(echo "$runs" | xargs -n 2 | cut -d' ' -f1 | paste -sd, -)
	total=$(echo "$runs" | xargs -n 2 | awk -v m="$mid" '$2 == m { print $1 }')
	for r in $(seq "$REPS"); do [ "$r" = "$mid" ] || rm -rf "$W/p${pre}j${j}r$r"; done
	tokens=$(awk -F'\t' '!/^#/ { t += $4 } END { print t }' "$out/manifest.tsv")
	pieces=$(wc -l < "$out/plan.tsv")
	plan=$(stage_s plan "$out.log") counts=$(stage_s counts "$out.log")
	tokenizer=$(stage_s tokenizer "$out.log") shards=$(stage_s shards "$out.log")
	manifest=$(stage_s manifest "$out.log")
	load=$(learn_s load "$out.log") setup=$(learn_s setup "$out.log")
	pairs=$(learn_s pairs "$out.log") merges=$(learn_s merges "$out.log")
	write=$(learn_s write "$out.log")
	[ -n "${total1:-}" ] || { total1=$total plan1=$plan counts1=$counts tokenizer1=$tokenizer \
		shards1=$shards manifest1=$manifest load1=$load merges1=$merges; }
	best=$(awk -v a="${best:-1e9}" -v b="$total" 'BEGIN { print (b < a ? b : a) }')
	printf '{"bench":"data-pipeline","input":"%s","bytes":%s,"vocab":%s,"pieces":%s,"pre":%s,"jobs":%s,"cpu_s":%s,"plan_s":%s,"counts_s":%s,"tokenizer_s":%s,"load_s":%s,"setup_s":%s,"pairs_s":%s,"merges_s":%s,"write_s":%s,"shards_s":%s,"manifest_s":%s,"total_s":%s,"runs_s":[%s],"other_s":%s,"tokens":%s,"speedup_vs_j1":%s,"counts_speedup":%s,"tokenizer_speedup":%s,"load_speedup":%s,"merges_speedup":%s,"shards_speedup":%s,"manifest_speedup":%s,"identical_to_j1":%s}\n' \
		"$name" "$bytes" "$VOCAB" "$pieces" "$pre" "$j" "$cpu" "$plan" "$counts" "$tokenizer" "$load" "$setup" \
		"$pairs" "$merges" "$write" "$shards" \
		"$manifest" "$total" "$runs_s" \
		"$(awk -v t="$total" -v p="$plan" -v a="$counts" -v b="$tokenizer" -v c="$shards" -v m="$manifest" \
			'BEGIN { printf "%.3f", t - p - a - b - c - m }')" \
		"$tokens" "$(ratio "$total1" "$total")" "$(ratio "$counts1" "$counts")" \
		"$(ratio "$tokenizer1" "$tokenizer")" "$(ratio "$load1" "$load")" "$(ratio "$merges1" "$merges")" \
		"$(ratio "$shards1" "$shards")" \
		"$(ratio "$manifest1" "$manifest")" "$([ "$same" = 1 ] && echo true || echo false)"
	[ -z "${last:-}" ] || rm -rf "$last"
	last=$out
done
done

# the tokenizer alone from the last run's counts, at each merge threshold
mapfile -t tok_counts < <(ls "$last"/counts/group-*.counts 2> /dev/null || ls "$last"/counts/[0-9]*.counts)
for pw in $PAR_WORDS; do
	t0=$(now)
	LMPIPE_BPE_PAR_WORDS=$pw LMPIPE_BPE_TIMES=1 "$BIN/bpe-learn" -j "$j" --special '<|endoftext|>' \
		--from-counts -v "$VOCAB" -o "$W/pw.bpe" "${tok_counts[@]}" 2> "$W/pw.log"
	total=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
	printf '{"bench":"data-pipeline-merges","jobs":%s,"par_words":%s,"total_s":%s,"load_s":%s,"pairs_s":%s,"merges_s":%s,"write_s":%s,"identical":%s}\n' \
		"$j" "$pw" "$total" "$(learn_s load "$W/pw.log")" "$(learn_s pairs "$W/pw.log")" \
		"$(learn_s merges "$W/pw.log")" "$(learn_s write "$W/pw.log")" \
		"$(cmp -s "$W/pw.bpe" "$last/tok.bpe" && echo true || echo false)"
done

if [ "${BENCH_HF:-1}" != 0 ] && python3 -c 'import tokenizers' 2> /dev/null; then
	threads=$(nproc)
	RAYON_NUM_THREADS=$threads python3 - "$TEXT" "$VOCAB" "$best" "$threads" <<'PY'
import json, sys, time
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
path, vocab, ours, threads = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
eot = "<|endoftext|>"
t0 = time.perf_counter()
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[eot],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False)
tok.train([path], trainer)
t1 = time.perf_counter()
with open(path, encoding="utf-8", errors="replace") as f:
    docs = [d + eot for d in f.read().split(eot)]
t2 = time.perf_counter()
n = sum(len(e.ids) for e in tok.encode_batch(docs))
t3 = time.perf_counter()
train, enc = t1 - t0, t3 - t2
print(json.dumps({"bench": "data-pipeline-hf", "input": path.rsplit("/", 1)[-1], "vocab": vocab,
                  "threads": threads, "hf_train_s": round(train, 3), "hf_encode_batch_s": round(enc, 3),
                  "hf_total_s": round(train + enc, 3), "hf_tokens": n, "ours_best_total_s": ours,
                  "ratio": round((train + enc) / ours, 2)}))
PY
else
	echo '{"bench":"data-pipeline-hf","hf_tokenizers":null}'
fi
