#!/bin/sh
# tests/lm-train-run.t: what lm-train keeps of a run (issue 23): -o checked
# and made before any training, a directory with another run's checkpoints
# refused without --resume or --force, SIGINT/SIGTERM save at the next step
# and exit 130/143, an interrupted run resumed ends bit for bit where an
# uninterrupted one does, --resume takes the recorded hyper-parameters and
# says what the command line changes, data too small for the windows is an
# error, --keep-last prunes.  Byte-level shards of a generated text, the
# tiny model, one thread.
. "$(dirname "$0")/lib.sh"

cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 2000 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d --val-docs 50 < text.tok
ok $? "byte-level shards"
M="-m tiny --vocab 256 --context 64 -j 1"

# -o names a file: refused at once, before any training (no log written).
: > afile
run lm-train $M -d d -n 5 -o afile --log a.jsonl
is "$rc" 2 "-o FILE: exit 2"
is "$err" "lm-train: afile: not a directory (-o names the checkpoint directory)" "-o FILE: message"
[ ! -e a.jsonl ]; ok $? "-o FILE: no training happened"

# Missing parents are made.
run lm-train $M -d d -n 2 -o runs/x/ck
is "$rc" 0 "-o with missing parents: exit 0 ($err)"
[ -L runs/x/ck/latest ] && [ -s runs/x/ck/step-00000002.safetensors ]
ok $? "-o with missing parents: the checkpoint is there"

# Another run's directory is not taken over.
run lm-train $M -d d -n 3 -o runs/x/ck
is "$rc" 2 "a fresh run into a directory with checkpoints: exit 2"
is "$err" "lm-train: runs/x/ck: holds the checkpoints of a run (latest); give --resume to continue it, or --force to start a new run there" "its message"
is "$(readlink runs/x/ck/latest)" "step-00000002.safetensors" "latest is left alone"
run lm-train $M -d d -n 3 -o runs/x/ck --force
is "$rc" 0 "--force starts a new run there"

# Too little data for the windows asked; nothing left behind.
printf 'hello world' | perl "$LMPIPE_ROOT/tests/bytes2tok.pl" | shard-pack -o small
run lm-train $M --context 1 -d small -n 3 -o new/ck
is "$rc" 2 "11 tokens, --context 1, batch 16: exit 2"
is "$err" "lm-train: small: 11 tokens hold 10 windows of 1 + 1 tokens, fewer than one step's 16 (--batch 16 x --accum 1): give less --context or --batch, or more data" "its message"
[ ! -e new ]; ok $? "no empty -o directory left by a run that failed before training"
run lm-train $M -d nothere -n 3 -o new2
[ "$rc" = 1 ] && [ ! -e new2 ]; ok $? "missing shards: exit 1, no -o directory left"

# SIGINT: a checkpoint at the next step, exit 130; resuming ends where an
# uninterrupted run ends, byte for byte.
STEPS=300
lm-train $M -d d -n $STEPS -o full -b 8 --log full.jsonl 2>/dev/null
ok $? "the uninterrupted run"
lm-train $M -d d -n $STEPS -o int -b 8 --log int.jsonl 2> int.err &
pid=$!
i=0
while [ "$(cat int.jsonl 2>/dev/null | grep -c '"step"')" -lt 5 ] && [ $i -lt 600 ]; do
	sleep 0.05; i=$((i + 1))
done
kill -INT $pid
wait $pid
is "$?" 130 "SIGINT: exit 130"
N=$(ls int | sed -n 's/^step-0*\([0-9][0-9]*\)\.safetensors$/\1/p')
F=$(printf 'step-%08d.safetensors' "${N:-0}")
is "$(cat int.err)" "lm-train: SIGINT at step $N of $STEPS: saved int/$F; continue with --resume" "SIGINT: the message names the checkpoint"
is "$(readlink int/latest)" "$F" "SIGINT: latest names it"
: > int/.step-00000999.safetensors.tmp-AbCdEf
run lm-train -d d -o int --resume -j 1 --log int.jsonl
is "$rc" 0 "resume with no other option ($err)"
is "$err" "lm-train: int: removed 1 unfinished file(s) of an interrupted run" "the killed run's temporary file is removed, and said so"
cmp -s full/step-$(printf %08d $STEPS).safetensors int/step-$(printf %08d $STEPS).safetensors
ok $? "interrupted at step $N and resumed: the final checkpoint equals the uninterrupted run's"

lm-train $M -d d -n 100000 -o term --log term.jsonl 2> term.err &
pid=$!
i=0
while [ "$(cat term.jsonl 2>/dev/null | grep -c '"step"')" -lt 2 ] && [ $i -lt 600 ]; do
	sleep 0.05; i=$((i + 1))
done
kill -TERM $pid
wait $pid
is "$?" 143 "SIGTERM: exit 143"
grep -q '^lm-train: SIGTERM at step [0-9]* of 100000: saved term/step-' term.err
ok $? "SIGTERM: message ($(cat term.err))"

# --resume remembers: a run of 20 steps at --lr 5e-3 with batch 8, its
# step-10 checkpoint resumed without those options, follows the run.
lrs() { sed -n 's/.*"step":\([0-9]*\),"loss":[^,]*,"lr":\([^,]*\),.*/\1 \2/p' "$@"; }
lm-train $M -d d -n 20 -b 8 --lr 5e-3 --warmup 2 -o h --ckpt-every 10 --log h.jsonl
mkdir h2 && cp h/step-00000010.safetensors h2/ && ln -s step-00000010.safetensors h2/latest
run lm-train -d d -o h2 --resume -j 1 --log h2.jsonl
is "$rc" 0 "resume with no hyper-parameter given ($err)"
is "$(lrs h2.jsonl | tr '\n' ' ')" "$(lrs h.jsonl | sed -n '11,$p' | tr '\n' ' ')" "it follows the recorded schedule"
cmp -s h/step-00000020.safetensors h2/step-00000020.safetensors
ok $? "and ends with the same checkpoint"
run lm-train -d d -o h2 --resume -j 1
is "$rc" 0 "resume of a finished run: exit 0"
is "$err" "lm-train: h2/latest is at step 20 of 20: the run is complete, nothing to do (-n N extends it)" "says so"
run lm-train -d d -o h2 --resume -j 1 -n 25 --log h3.jsonl
is "$err" "lm-train: -n 25 extends the run of 20 steps (h2/latest): the cosine schedule still ends at step 20, then the learning rate stays at 0.0005" "extending: the schedule is said"
is "$(lrs h3.jsonl | sed 's/.* //' | sort -u)" "0.00050000000000000001" "extending: the learning rate stays at the floor, no jump"
run lm-train -d d -o h2 --resume -j 1 -n 27 --lr 1e-3 --warmup 2
is "$err" "lm-train: --lr 0.001 replaces the run's 0.005 (h2/latest)
lm-train: -n 27 extends the run of 25 steps (h2/latest): the cosine schedule still ends at step 20, then the learning rate stays at 0.0001" "a changed value is said; an equal one is not"
run lm-train -d d -o h2 --resume -j 1 -s 7
is "$rc" 2 "another seed on resume: exit 2"
is "$err" "lm-train: --seed 7: h2/latest continues a run with seed 0, which cannot change" "its message"
rm h2/latest
run lm-train -d d -o h2 --resume -j 1 -n 28
is "$rc" 0 "latest missing: resume from the newest step file ($err)"
case $err in "lm-train: h2/latest is missing: resuming from h2/step-00000027.safetensors, the newest checkpoint there"*) ok 0 "said so" ;; *) ok 1 "said so: $err" ;; esac

# A batch the memory cannot hold: a message and exit 1, not a crash (the
# message's parameter count once read a config model_free had cleared).
# Address space limited so that the allocation fails here; ASan needs more.
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then
	ok 0 "# SKIP a limited address space under ASan"
	ok 0 "# SKIP a limited address space under ASan"
else
	run sh -c "ulimit -v 3000000; lm-train $M -d d -n 1 -b 1000000 -j 1"
	is "$rc" 1 "a batch that does not fit the memory: exit 1"
	case $err in "lm-train: out of memory"*"parameters at batch 1000000"*"smaller batch"*) ok 0 "it says so" ;;
		*) ok 1 "it says so: $err" ;; esac
fi

# --keep-last
run lm-train $M -d d -n 20 -o k --ckpt-every 5 --keep-last 2
is "$(ls k | tr '\n' ' ')" "latest step-00000015.safetensors step-00000020.safetensors " "--keep-last 2 keeps the newest two"
done_testing
