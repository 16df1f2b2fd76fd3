#!/bin/sh
# bench/rl-experiment.sh: issue 21's experiment as one command.  Pretrain a
# model on Gutenberg text mixed with a math-flavoured corpus that lm-task's
# generators write (worked arithmetic in plain prose, without the r1-zero
# tags: pipelines/pretrain.mk), then SFT and GRPO on multi-digit arithmetic
# in the r1-zero format (pipelines/align.mk), and Dr. GRPO (advantages
# without the std, per-sequence sums over a constant) from the same SFT
# checkpoint for comparison.  Prints the held-out accuracy (greedy, N_TEST
# problems never trained on) per stage and per round for both, the
# rollouts' mean reward per round, and the time of each part; writes
# W/results.jsonl (one line per stage and method) and W/results.txt.
#
#   bench/rl-experiment.sh              MODE=short on DEVICE=cuda: about 2.5 min on one H200
#                                       (bench/rl-experiment-notes.md has its results)
#   MODE=full bench/rl-experiment.sh    the whole corpus, longer runs
#   MODE=smoke DEVICE=cpu bench/rl-experiment.sh   tiny sizes, the plumbing on a CPU
#   GSM8K=DIR bench/rl-experiment.sh    then SFT and GRPO on GSM8K problems too
#                                       (DIR/train.jsonl, DIR/test.jsonl; GSM_TRAIN,
#                                       GSM_ROUNDS, GSM_MAX_TOKENS; W/gsm8k/report.txt;
#                                       for the GPU machine, copy ../shared/data/gsm8k
#                                       into an ignored folder and carry it)
#   bench/rl-experiment.sh slice [MB]   here, beside ../shared: write
#        .devdata/gutenberg-slice.txt.xz, the first MB (default 30) megabytes
#        of the Gutenberg training text cut at a book's end, for the GPU
#        machine (which cannot see ../shared)
#
# The text, in order: TEXT=FILE; else .devdata/gutenberg-slice.txt.xz
# (decompressed into W with python3's lzma); else ../shared/data's
# gutenberg_train.txt (full: always that, or .devdata/gutenberg_train.txt.xz).
# Every size is a variable (MB_TEXT, MATH, STEPS, BATCH, N_TRAIN, ROUNDS,
# PROMPTS, G, ...: see the modes below); W=DIR keeps the work (default a
# new folder under TMPDIR), and a stage already done in W is not redone.
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
SHARED=${SHARED:-$ROOT/../shared/data/corpus}
DEVDATA=$ROOT/.devdata
SEP='<|endoftext|>'

# The first MB megabytes of the Gutenberg training text, whole books only.
slice() {
	mb=${1:-30}
	[ -r "$SHARED/gutenberg_train.txt" ] || { echo "rl-experiment.sh: no $SHARED/gutenberg_train.txt" >&2; exit 1; }
	mkdir -p "$DEVDATA"
	perl -e 'my ($max, $sep) = @ARGV; $/ = "$sep\n"; my $n = 0;
		while (<STDIN>) { $n += length; print; last if $n >= $max * 1e6 }' "$mb" "$SEP" \
		< "$SHARED/gutenberg_train.txt" | xz -T2 -6 > "$DEVDATA/gutenberg-slice.txt.xz.tmp"
	mv "$DEVDATA/gutenberg-slice.txt.xz.tmp" "$DEVDATA/gutenberg-slice.txt.xz"
	ls -l "$DEVDATA/gutenberg-slice.txt.xz"
}
if [ "${1:-}" = slice ]; then
	slice "${2:-30}"
	exit 0
fi

MODE=${MODE:-short}
DEVICE=${DEVICE:-cuda}
# Sizes: pretraining (model, steps, batch, learning rate), the text's
# megabytes (0: all of it) and the math problems mixed in, then alignment.
case $MODE in
smoke)
	: "${MB_TEXT:=1}" "${MATH:=2000}" "${VOCAB:=400}" "${MODEL:=tiny}" "${CONTEXT:=192}"
	: "${MODEL_OPTS:=--vocab $VOCAB --context $CONTEXT --d-model 32 --layers 1 --heads 2 --d-ff 64}"
	: "${STEPS:=20}" "${BATCH:=4}" "${LR:=3e-3}" "${WARMUP:=2}" "${VAL_DOCS:=5}" "${EVAL_EVERY:=10}"
	: "${DIGITS:=2}" "${N_TRAIN:=16}" "${N_TEST:=4}" "${SFT_EPOCHS:=1}" "${SFT_BATCH:=8}"
	: "${ROUNDS:=2}" "${PROMPTS:=2}" "${G:=2}" "${GRPO_BATCH:=4}" "${MAX_TOKENS:=8}" "${THREADS:=1}"
	: "${GSM_MAX:=8}" ;;
short)
	: "${MB_TEXT:=30}" "${MATH:=60000}" "${VOCAB:=10000}" "${MODEL:=ts}" "${CONTEXT:=256}"
	: "${MODEL_OPTS:=--vocab $VOCAB --context $CONTEXT}"
	: "${STEPS:=5000}" "${BATCH:=128}" "${LR:=2e-3}" "${WARMUP:=200}" "${VAL_DOCS:=50}" "${EVAL_EVERY:=1000}"
	: "${DIGITS:=2}" "${N_TRAIN:=8000}" "${N_TEST:=500}" "${SFT_EPOCHS:=3}" "${SFT_BATCH:=32}"
	: "${ROUNDS:=8}" "${PROMPTS:=256}" "${G:=8}" "${GRPO_BATCH:=256}" "${MAX_TOKENS:=40}" "${THREADS:=0}"
	: "${GSM_MAX:=160}" ;;
full)
	: "${MB_TEXT:=0}" "${MATH:=400000}" "${VOCAB:=10000}" "${MODEL:=ts}" "${CONTEXT:=256}"
	: "${MODEL_OPTS:=--vocab $VOCAB --context $CONTEXT}"
	: "${STEPS:=12000}" "${BATCH:=128}" "${LR:=2e-3}" "${WARMUP:=200}" "${VAL_DOCS:=300}" "${EVAL_EVERY:=2000}"
	: "${DIGITS:=3}" "${N_TRAIN:=20000}" "${N_TEST:=1000}" "${SFT_EPOCHS:=2}" "${SFT_BATCH:=32}"
	: "${ROUNDS:=20}" "${PROMPTS:=256}" "${G:=8}" "${GRPO_BATCH:=256}" "${MAX_TOKENS:=40}" "${THREADS:=0}"
	: "${GSM_MAX:=160}" ;;
*)
	echo "rl-experiment.sh: MODE is smoke, short or full, not '$MODE'" >&2; exit 2 ;;
esac
: "${SFT_LR:=1e-3}" "${GRPO_LR:=1e-4}" "${OPS:=+-}" "${ARITH_STEPS:=1}"
W=${W:-$(mktemp -d "${TMPDIR:-/tmp}/rl-experiment.XXXXXX")}
mkdir -p "$W"
for p in lm-task bpe-learn bpe-encode shard-pack lm-train lm-sample rl-reward rl-update; do
	[ -x "$BIN/$p" ] || { echo "rl-experiment.sh: no $BIN/$p (run make first)" >&2; exit 1; }
done
now() { date +%s; }
T0=$(now)
log() { echo "rl-experiment: $* ($(( $(now) - T0 )) s)" >&2; }
unxz_to() { # unxz_to IN.xz OUT
	python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
		"$1" "$2.tmp" && mv "$2.tmp" "$2"
}

# 1. The corpus: the text (cut to MB_TEXT at a book's end), then MATH
#    worked problems in plain prose, 20 to a document.
if [ ! -s "$W/corpus.txt" ]; then
	text=${TEXT:-}
	if [ -z "$text" ]; then
		if [ "$MODE" != full ] && [ -r "$DEVDATA/gutenberg-slice.txt.xz" ]; then
			unxz_to "$DEVDATA/gutenberg-slice.txt.xz" "$W/text.txt"; text=$W/text.txt
		elif [ -r "$SHARED/gutenberg_train.txt" ]; then
			text=$SHARED/gutenberg_train.txt
		elif [ -r "$DEVDATA/gutenberg_train.txt.xz" ]; then
			unxz_to "$DEVDATA/gutenberg_train.txt.xz" "$W/text.txt"; text=$W/text.txt
		else
			echo "rl-experiment.sh: no text: set TEXT=FILE, or carry .devdata/gutenberg-slice.txt.xz" \
				"(bench/rl-experiment.sh slice, where ../shared is)" >&2
			exit 1
		fi
	fi
	printf 'Problem: {question}\nSolution:' > "$W/math.prompt"
	{
		perl -e 'my ($max, $sep) = @ARGV; $/ = "$sep\n"; my $n = 0;
			while (<STDIN>) { $n += length; print; last if $max > 0 && $n >= $max * 1e6 }' \
			"$MB_TEXT" "$SEP" < "$text"
		# seeds 1000 and up: never the alignment's (1, 2, 100 + k)
		for d in $(seq 1 "$DIGITS"); do
			"$BIN/lm-task" arith -n $((MATH / DIGITS)) -d "$d" --ops '+-*' --steps $((d % 2 + 1)) \
				-s $((1000 + d)) -r -t "$W/math.prompt"
		done | perl -MJSON::PP -ne 'my $r = decode_json($_); my $s = $r->{response};
			$s =~ s{\s*</think>\s*<answer>\s*(.*?)\s*</answer>}{ The answer is $1.};
			print $r->{prompt}, $s, "\n\n"; print "'"$SEP"'\n" if $. % 20 == 0'
	} > "$W/corpus.txt.tmp"
	mv "$W/corpus.txt.tmp" "$W/corpus.txt"
	log "corpus: $(wc -c < "$W/corpus.txt") bytes ($MATH math problems)"
fi

# 2. Pretraining (pretrain.mk's stages up to the checkpoint; no plots).
j=""
[ "$THREADS" = 0 ] || j="-j $THREADS"
make -s -f "$ROOT/pipelines/pretrain.mk" BIN="$BIN" W="$W" DEVICE="$DEVICE" VOCAB="$VOCAB" \
	MODEL="$MODEL" CONTEXT="$CONTEXT" MODEL_OPTS="$MODEL_OPTS" STEPS="$STEPS" BATCH="$BATCH" \
	LR="$LR" WARMUP="$WARMUP" VAL_DOCS="$VAL_DOCS" EVAL_EVERY="$EVAL_EVERY" TRAIN_OPTS="$j" \
	PROGRESS= "$W/ckpt/.done" >&2
log "pretrained: $(tail -1 "$W/train.jsonl")"

# 3. SFT and GRPO rounds, then Dr. GRPO from the same SFT model (its
#    folder starts as a copy of the first one's base and SFT stages).
align() { # align NAME [UPDATE_OPTS]
	make -s -f "$ROOT/pipelines/align.mk" BIN="$BIN" W="$W" A="$W/$1" DEVICE="$DEVICE" \
		DIGITS="$DIGITS" OPS="$OPS" ARITH_STEPS="$ARITH_STEPS" N_TRAIN="$N_TRAIN" N_TEST="$N_TEST" \
		SFT_EPOCHS="$SFT_EPOCHS" SFT_BATCH="$SFT_BATCH" SFT_LR="$SFT_LR" ROUNDS="$ROUNDS" \
		PROMPTS="$PROMPTS" G="$G" GRPO_BATCH="$GRPO_BATCH" GRPO_LR="$GRPO_LR" \
		MAX_TOKENS="$MAX_TOKENS" UPDATE_OPTS="${2:-}" PROGRESS= \
		"$W/$1/report.txt" "$W/$1/rounds.jsonl" >&2
}
align grpo
log "GRPO: $(tail -1 "$W/grpo/report.txt")"
if [ ! -e "$W/drgrpo/sft/latest" ]; then
	mkdir -p "$W/drgrpo"
	for f in t0 train.jsonl test.jsonl eval-base.json eval-sft.json sft sft-metrics.json; do
		cp -a "$W/grpo/$f" "$W/drgrpo/"
	done
fi
align drgrpo '--no-std --agg normalize'
log "Dr. GRPO: $(tail -1 "$W/drgrpo/report.txt")"

# 4. GSM8K (GSM8K=DIR holding train.jsonl and test.jsonl: ../shared/data/gsm8k,
#    or a copy carried to the GPU machine): SFT and GRPO from the pretrained
#    model on the training problems whose prompt and worked solution fit the
#    context (rl-update refuses a longer sequence), held-out accuracy on the
#    test problems whose prompt takes at most half of it, each stage's
#    problems drawn by its seed.
if [ -n "${GSM8K:-}" ]; then
	G8=$W/gsm8k
	mkdir -p "$G8"
	# fit IN MAX [-r]: the records of IN whose prompt (and worked solution,
	# with -r) is at most MAX tokens of this tokenizer
	fit() {
		"$BIN/lm-task" gsm8k -t "$ROOT/pipelines/arith.prompt" ${3:-} "$1" |
			perl -MJSON::PP -CO -ne 'my $r = decode_json($_);
				my $s = $r->{prompt} . ($r->{response} // ""); $s =~ s/\n/ /g; print "$s\n"' |
			"$BIN/bpe-encode" -t "$W/tok.bpe" --doc-per-line --text | awk '{ print NF }' > "$G8/lens"
		grep -v '^[[:space:]]*$' "$1" | paste "$G8/lens" - | awk -F'\t' -v max="$2" '$1 <= max' | cut -f2-
	}
	if [ ! -s "$G8/test-fit.jsonl" ]; then
		fit "$GSM8K/train.jsonl" $((CONTEXT - 8)) -r > "$G8/fit.jsonl"
		# held-out prompts with room for a solution after them
		fit "$GSM8K/test.jsonl" $((CONTEXT / 2)) > "$G8/test-fit.jsonl.tmp"
		mv "$G8/test-fit.jsonl.tmp" "$G8/test-fit.jsonl"
	fi
	log "GSM8K: $(wc -l < "$G8/fit.jsonl") of $(grep -c . "$GSM8K/train.jsonl") training problems fit $CONTEXT tokens," \
		"$(wc -l < "$G8/test-fit.jsonl") of $(grep -c . "$GSM8K/test.jsonl") test prompts $((CONTEXT / 2))"
	make -s -f "$ROOT/pipelines/align.mk" BIN="$BIN" W="$W" A="$G8" DEVICE="$DEVICE" \
		TASK="$BIN/lm-task gsm8k -t $ROOT/pipelines/arith.prompt $G8/fit.jsonl" \
		TEST_TASK="$BIN/lm-task gsm8k -t $ROOT/pipelines/arith.prompt $G8/test-fit.jsonl" \
		TASK_NAME="GSM8K, prompts of at most $((CONTEXT / 2)) tokens" \
		N_TRAIN="${GSM_TRAIN:-$N_TRAIN}" N_TEST="$N_TEST" SFT_EPOCHS="$SFT_EPOCHS" \
		SFT_BATCH="$SFT_BATCH" SFT_LR="$SFT_LR" ROUNDS="${GSM_ROUNDS:-$ROUNDS}" PROMPTS="$PROMPTS" \
		G="$G" GRPO_BATCH="$GRPO_BATCH" GRPO_LR="$GRPO_LR" MAX_TOKENS="${GSM_MAX_TOKENS:-$GSM_MAX}" \
		PROGRESS= "$G8/report.txt" >&2
	log "GSM8K: $(tail -1 "$G8/report.txt")"
fi

# 5. The results: per stage, each method's accuracy; per round, the
#    rollouts' mean reward.
{
	for m in grpo drgrpo; do
		perl -ne 'print "{\"method\":\"'"$m"'\",", substr($_, 1)' "$W/$m/log.jsonl"
	done
} > "$W/results.jsonl"
perl -e 'my (%acc, %fmt, %rew, @stages);
	for my $m (qw(grpo drgrpo)) {
		open my $h, "<", "$ARGV[0]/$m/log.jsonl" or die; while (<$h>) {
			/"stage":"([^"]+)","accuracy":([^,]+),"format":([^,]+)/ or next;
			push @stages, $1 unless grep { $_ eq $1 } @stages; $acc{$m}{$1} = $2; $fmt{$m}{$1} = $3 }
		open $h, "<", "$ARGV[0]/$m/rounds.jsonl" or die; my $k = 0; while (<$h>) {
			$k++; $rew{$m}{"grpo-$k"} = /"reward_mean":([-0-9.e+]+)/ ? $1 : "" } }
	printf "held-out accuracy (format rate), %s problems; mean reward of the round'"'"'s rollouts\n", $ARGV[1];
	printf "%-8s %-22s %-22s\n", "stage", "GRPO", "Dr. GRPO";
	for my $s (@stages) { printf "%-8s %-22s %-22s\n", $s,
		map { sprintf "%.3f (%.2f)%s", $acc{$_}{$s}, $fmt{$_}{$s},
			defined $rew{$_}{$s} ? sprintf(" r %.3f", $rew{$_}{$s}) : "" } qw(grpo drgrpo) }' \
	"$W" "$N_TEST" > "$W/results.txt"
cat "$W/results.txt"
echo "mode $MODE on $DEVICE: $(( $(now) - T0 )) s in all; work in $W"
