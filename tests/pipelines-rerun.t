#!/bin/sh
# tests/pipelines-rerun.t: pipelines/pretrain.mk run again (issue 23): an
# interrupt (SIGINT to the whole make, as Ctrl-C sends) loses no checkpoint
# and the re-run resumes; a changed STEPS extends the run, a changed
# VAL_DOCS repacks, a changed LR starts anew and keeps the old run aside;
# a corpus without <|endoftext|> is cut into paragraphs for its split.
. "$(dirname "$0")/lib.sh"
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "1..0 # SKIP gnuplot is not installed (apt-get install gnuplot-nox)"; exit 0
fi
if ! command -v setsid >/dev/null 2>&1; then
	echo "1..0 # SKIP setsid is not installed (util-linux)"; exit 0
fi
cd "$TMP" || exit 1
W=$TMP/w
mkdir -p "$W"
perl "$LMPIPE_ROOT/tests/mktext.pl" 1500 2 | awk '{ print } NR % 10 == 0 { print "<|endoftext|>" }' > "$W/corpus.txt"
export OMP_WAIT_POLICY=passive
# ./pre STEPS [VAR=VALUE]...: the pipeline (a script, so that setsid runs it)
cat > pre <<END
#!/bin/sh
steps=\$1; shift
exec make -f "$LMPIPE_ROOT/pipelines/pretrain.mk" BIN="$LMPIPE_BIN" W="$W" VOCAB=300 VAL_DOCS=10 \\
	MODEL_OPTS="--vocab 300 --context 64 --d-model 32 --layers 1 --heads 2 --d-ff 64" \\
	STEPS=\$steps BATCH=4 EVAL_EVERY=50 WARMUP=2 TRAIN_OPTS="-j 1" \\
	SAMPLE_OPTS="--max-tokens 8 -j 1" "\$@"
END
chmod +x pre
pre() { ./pre "$@"; }
# steps: how many step lines the log has, the first and the last, and
# whether each step follows the one before
steps() { sed -n 's/^{"step":\([0-9]*\),"loss".*/\1/p' "$W/train.jsonl" |
	awk 'NR == 1 { f = $1 } $1 != NR { bad = 1 } END { print NR, f, $1, bad ? "gap" : "in order" }'; }

N=3000
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then N=1000; fi
setsid ./pre $N > make1.out 2>&1 &
pgid=$!
i=0
while [ "$(cat "$W/train.jsonl" 2>/dev/null | grep -c '"step"')" -lt 5 ] && [ $i -lt 1200 ]; do
	sleep 0.05; i=$((i + 1))
done
perl -e 'kill "INT", -$ARGV[0]' $pgid # the whole process group, as Ctrl-C
wait $pgid
[ -L "$W/ckpt/latest" ] && [ -s "$W/ckpt/latest" ]
ok $? "after Ctrl-C the checkpoint and latest are still there" || sed 's/^/# /' make1.out | tail -5
grep -q "SIGINT at step [0-9]* of $N: saved" make1.out
ok $? "lm-train saved at the interrupt"
pre $N > make2.out 2>&1
ok $? "the re-run finishes" || sed 's/^/# /' make2.out | tail -5
grep -q 'resuming' make2.out
ok $? "it resumed"
is "$(steps)" "$N 1 $N in order" "the log has every step once"
is "$(readlink "$W/ckpt/latest")" "step-$(printf %08d $N).safetensors" "latest is the last step"

pre $N -q
ok $? "nothing to redo with the same parameters"
pre $((N + 5)) -q
[ $? = 1 ]; ok $? "STEPS changed: the training stage is out of date"
pre $((N + 5)) > make3.out 2>&1
ok $? "STEPS changed: it runs" || sed 's/^/# /' make3.out | tail -5
grep -q -- "-n $((N + 5)) extends the run of $N steps" make3.out
ok $? "STEPS changed: the run is extended"
is "$(readlink "$W/ckpt/latest")" "step-$(printf %08d $((N + 5))).safetensors" "STEPS changed: latest is the new last step"

pre $((N + 5)) VAL_DOCS=12 > make4.out 2>&1
ok $? "VAL_DOCS changed: it runs" || sed 's/^/# /' make4.out | tail -5
is "$(shard-pack -l "$W"/data/train-val-*.lms | awk '$NF ~ /val-.*lms$/ { d += $2 } END { print d }')" 12 "VAL_DOCS changed: the shards are packed again"
[ -s "$W/ckpt.1/step-$(printf %08d $((N + 5))).safetensors" ] && [ -s "$W/ckpt.1/train.jsonl" ]
ok $? "VAL_DOCS changed the recipe: the old run is kept in ckpt.1 with its log"
is "$(readlink "$W/ckpt/latest")" "step-$(printf %08d $((N + 5))).safetensors" "and a new run trained"

# A corpus without separators: paragraphs are its documents.
W2=$TMP/w2
mkdir -p "$W2"
perl "$LMPIPE_ROOT/tests/mktext.pl" 600 3 | awk '{ print } NR % 4 == 0 { print "" }' > "$W2/corpus.txt"
pre 10 W="$W2" VAL_DOCS=5 > make5.out 2>&1
ok $? "a corpus without <|endoftext|> trains" || sed 's/^/# /' make5.out | tail -5
is "$(shard-pack -l "$W2"/data/train-val-*.lms 2>/dev/null | awk '$NF ~ /val-.*lms$/ { d += $2 } END { print d }')" 5 "its validation set is 5 paragraphs"
done_testing
