#!/bin/bash
# tests/data-slurm.t: pipelines/data.mk under Slurm on this one host.  The test
# starts munged and a single-node Slurm (slurmctld and slurmd on 127.0.0.1,
# free ports, a generated slurm.conf, everything in a temporary directory),
# runs the job-array variant (LAUNCH=slurm, N=3), the example batch script
# pipelines/data.sbatch and the srun variant (LAUNCH=srun, N=2), checks that the tokenizer and the shards are the bytes of a local run,
# and stops the daemons.  It skips, saying why, when the programs are missing
# (pipelines/deps.sh installs slurm-wlm and munge), when not root, or when the
# daemons do not start.
. "$(dirname "$0")/lib.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL  # this make is not a sub-make of the one running the tests
. "$(dirname "$0")/slurm.sh"
cd "$TMP" || exit 1
slurm_up

mkdir corpus
for s in 1 2 3; do
	perl "$LMPIPE_ROOT/tests/mktext.pl" 600 $s | awk '{ print } NR % 9 == 0 { print "<|endoftext|>" }' > corpus/f$s.txt
done
gzip corpus/f3.txt
MK=$LMPIPE_ROOT/pipelines/data.mk
OPTS=(BIN="$LMPIPE_BIN" INPUTS="$TMP/corpus" VOCAB=350 PIECE_BYTES=8Ki VAL_FRACTION=0.2)
digest() {
	(cd "$TMP/$1" && find tok.bpe manifest.tsv shards -type f | LC_ALL=C sort | xargs sha256sum | sha256sum)
}
make -s -f "$MK" "${OPTS[@]}" W="$TMP/local" -j2 > local.log 2>&1
ok $? "the local run" || sed 's/^/# /' local.log | tail

make -s -f "$MK" "${OPTS[@]}" W="$TMP/array" LAUNCH=slurm N=3 SLURM_POLL=0.3 > array.log 2>&1
ok $? "LAUNCH=slurm (a job array of 3 tasks per stage)" || sed 's/^/# /' array.log | tail
is "$(digest array)" "$(digest local)" "the job array's tokenizer and shards are the local run's bytes"
is "$(ls array/logs/counts-*.log array/logs/shards-*.log | wc -l)" 6 "one log per array task and stage"

jid=$(sbatch --parsable --ntasks=2 --output="$TMP/sbatch.log" "$LMPIPE_ROOT/pipelines/data.sbatch" \
	"${OPTS[@]}" W="$TMP/sbatch" 2> sbatch.err)
ok $? "pipelines/data.sbatch submitted" || sed 's/^/# /' sbatch.err
while squeue -h -j "${jid%%;*}" 2> /dev/null | grep -q .; do sleep 0.3; done
[ -s sbatch/manifest.tsv ]
ok $? "the example pipelines/data.sbatch ran (srun inside a job of 2 tasks)" || sed 's/^/# /' sbatch.log | tail
is "$(digest sbatch)" "$(digest local)" "its tokenizer and shards are the local run's bytes"

make -s -f "$MK" "${OPTS[@]}" W="$TMP/srun" LAUNCH=srun N=2 > srun.log 2>&1
ok $? "LAUNCH=srun (2 tasks)" || sed 's/^/# /' srun.log | tail
is "$(digest srun)" "$(digest local)" "srun's tokenizer and shards are the local run's bytes"
# a task that fails: make fails, the logs say why, the other tasks' output is kept
mkdir bad
printf '{"text":"a"}\n' > bad/a.jsonl
printf '{"text":"b"}\n{"body":"c"}\n' > bad/b.jsonl
printf '{"text":"d"}\n' > bad/c.jsonl
make -s -f "$MK" BIN="$LMPIPE_BIN" INPUTS="$TMP/bad" FORMAT=jsonl VOCAB=260 W="$TMP/fail" \
	LAUNCH=slurm N=3 SLURM_POLL=0.3 > fail.log 2>&1
is "$?" 2 "a failing array task: make fails"
grep -q "missing: a task failed (see above, and $TMP/fail/logs)" fail.log &&
	grep -q "b.jsonl:2: no \"text\" member" fail/logs/counts-1.log
ok $? "... saying where to look; the task's log names the file and line" || sed 's/^/# /' fail.log
[ -s fail/counts/000000.counts ] && [ -s fail/counts/000002.counts ] && [ ! -e fail/counts/000001.counts ]
ok $? "... the other tasks' counts kept"
done_testing
