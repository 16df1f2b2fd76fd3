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
START_WAIT=30  # seconds for the daemons to come up
skip() { echo "1..0 # SKIP $*"; exit 0; }
for p in munged mungekey slurmctld slurmd sbatch srun sinfo; do
	command -v $p > /dev/null || skip "$p is not installed (pipelines/deps.sh installs slurm-wlm and munge)"
done
[ "$(id -u)" = 0 ] || skip "the test runs slurmd, which needs root"
cd "$TMP" || exit 1
S=$TMP/slurm
mkdir -p "$S/state" "$S/spool"
pids=()
stop() {
	for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2> /dev/null; done
	[ -S "$S/munge.sock" ] && munged -S "$S/munge.sock" --stop > /dev/null 2>&1
	rm -rf "$TMP"
}
trap stop EXIT
free_port() {
	perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1")->sockport, "\n"'
}

mungekey -c -k "$S/munge.key" || skip "mungekey cannot make a key"
munged --force -S "$S/munge.sock" --key-file="$S/munge.key" --log-file="$S/munged.log" \
	--pid-file="$S/munged.pid" --seed-file="$S/munged.seed" 2> "$S/munged.err" ||
	skip "munged does not start: $(head -c 300 "$S/munged.err")"
cat > "$S/slurm.conf" <<EOF
ClusterName=lmpipetest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$S/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$S/slurm.conf
slurmctld -D -i > "$S/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N localhost > "$S/slurmd.out" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 1 $((START_WAIT * 4))); do
	if sinfo -h -o %t 2> /dev/null | grep -qx idle; then up=1; break; fi
	sleep 0.25
done
[ $up = 1 ] || skip "the Slurm daemons did not come up in ${START_WAIT} s: $(tail -n 3 "$S"/*.out "$S"/*.log 2> /dev/null | tr '\n' ' ' | head -c 400)"

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
