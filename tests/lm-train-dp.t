#!/bin/bash
# tests/lm-train-dp.t: data parallel lm-train on the CPU over OpenMPI
# (issue 18).  Two ranks (mpirun -np 2, and lm-train --gpus 2, which execs
# it) equal one process with --accum 2 bit for bit: loss curve, weights and
# optimizer state (the sums are taken in rank order, libcommon/dist); a
# one-process run of another global batch does not (the comparison can
# fail).  ZeRO-1 and ZeRO-2 equal ZeRO-0 (ZeRO-2 also with tied embeddings
# and with --accum 2), and the memory line shows what each one shards;
# Muon trains the same on 2 ranks and refuses ZeRO; a 2-rank checkpoint
# resumes on 1
# rank and that one on 2 ranks with ZeRO-1, ending where an uninterrupted
# run ends; a killed or stopped rank ends the run within --dist-timeout with
# a message naming it; SIGTERM to mpirun saves the step every rank stopped
# at; ranks started with different options are refused;
# a Slurm environment without MPI is refused on the CPU; without -j a rank
# takes its share of the host's processors.  Skips without
# mpirun or an MPI build.
. "$(dirname "$0")/lib.sh"
skip() { echo "1..0 # SKIP $*"; exit 0; }
command -v mpirun > /dev/null || skip "no mpirun (pipelines/deps.sh installs openmpi-bin, libopenmpi-dev)"
ldd "$LMPIPE_BIN/lm-train" | grep -q libmpi || skip "lm-train was built without MPI (make MPI=0)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ "${LMPIPE_SANITIZE:-0}" = 1 ] && export ASAN_OPTIONS=detect_leaks=0  # OpenMPI's own allocations
cd "$TMP" || exit 1
perl "$LMPIPE_ROOT/tests/mktext.pl" 800 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d --val-docs 20 < text.tok
M=(-m tiny --vocab 256 --context 16 -j 1 --lr 3e-3 -b 2 --cycle 6 --bucket-mb 0.02 --dist-timeout 20)
data() { perl "$LMPIPE_ROOT/tests/st_data.pl" "$1"; }
curve() { grep '"step"' "$1" | sed 's/,"tokens_per_s".*//'; }
nonorm() { sed 's/,"grad_norm":[^,]*//'; }  # ZeRO sums the norm per shard: last digits differ
mpi2() { mpirun -np 2 lm-train "$@"; }  # not for jobs put in the background: $! would be the subshell's

lm-train "${M[@]}" -n 6 --accum 2 -d d -o one --log one.jsonl --val d-val --eval-every 3 2> one.err
ok $? "one process, --accum 2" || sed 's/^/# /' one.err
mpi2 "${M[@]}" -n 6 -d d -o two --log two.jsonl --val d-val --eval-every 3 > two.out 2>&1
ok $? "mpirun -np 2 lm-train" || sed 's/^/# /' two.out | tail
grep -q "lm-train: 2 ranks, per rank: weights" two.out
ok $? "the memory per rank is printed at start" || sed 's/^/# /' two.out
is "$(curve two.jsonl)" "$(curve one.jsonl)" "2 ranks: the loss curve (and validation loss) of one process"
is "$(data two/step-00000006.safetensors)" "$(data one/step-00000006.safetensors)" \
	"2 ranks: the weights and optimizer state of one process, bit for bit"
lm-train "${M[@]}" -n 6 -d d -o other --log other.jsonl 2> /dev/null
[ "$(data other/step-00000006.safetensors)" != "$(data one/step-00000006.safetensors)" ] &&
	[ "$(curve other.jsonl)" != "$(curve one.jsonl)" ]
ok $? "a run of another global batch differs (the comparisons can fail)"
lm-train "${M[@]}" -n 6 -d d -o g2 --gpus 2 2> g2.err
is "$(data g2/step-00000006.safetensors)" "$(data one/step-00000006.safetensors)" \
	"--gpus 2 (which execs mpirun -np 2) trains the same"

for z in 1 2; do
	mpi2 "${M[@]}" -n 6 -d d -o z$z --log z$z.jsonl --zero $z > z$z.out 2>&1
	ok $? "--zero $z" || sed 's/^/# /' z$z.out | tail
	grep -q "ZeRO-$z, per rank: .*optimizer state .* (this rank's shard)" z$z.out
	ok $? "--zero $z: the memory line says the optimizer state is sharded" || sed 's/^/# /' z$z.out
	is "$(data z$z/step-00000006.safetensors)" "$(data two/step-00000006.safetensors)" \
		"--zero $z: weights and optimizer state equal ZeRO-0's, bit for bit"
	is "$(curve z$z.jsonl | nonorm)" "$(curve two.jsonl | grep -v val_loss | nonorm)" \
		"--zero $z: the loss curve equals ZeRO-0's"
done
grep -q "ZeRO-2, per rank: .*gradients [0-9.]* MiB (this rank's shard and the range buffers in flight)" z2.out
ok $? "--zero 2: the memory line says the gradients are sharded too" || sed 's/^/# /' z2.out
# ZeRO-2 with tied embeddings: the embedding's range is written first (the
# head's backward pass) and last; with --accum 2 the first micro-batch
# accumulates in the whole buffer, as ZeRO-1 does
mpi2 "${M[@]}" -n 4 -d d -o t0 --tie-embeddings > t0.out 2>&1
mpi2 "${M[@]}" -n 4 -d d -o t2 --tie-embeddings --zero 2 > t2.out 2>&1
is "$(data t2/step-00000004.safetensors)" "$(data t0/step-00000004.safetensors)" \
	"--zero 2, tied embeddings: weights and optimizer state equal ZeRO-0's, bit for bit"
mpi2 "${M[@]}" -n 3 --accum 2 -d d -o a0 > a0.out 2>&1
mpi2 "${M[@]}" -n 3 --accum 2 -d d -o a2 --zero 2 > a2.out 2>&1
is "$(data a2/step-00000003.safetensors)" "$(data a0/step-00000003.safetensors)" \
	"--zero 2 --accum 2: weights and optimizer state equal ZeRO-0's, bit for bit"
grep -q "gradients [0-9.]* MiB (whole: --accum > 1 accumulates" a2.out
ok $? "--zero 2 --accum 2: the memory line says the gradients stay whole" || sed 's/^/# /' a2.out
# The memory per rank of ZeRO-0, 1 and 2, on a model of 16 layers with a
# bucket smaller than a layer (so the ranges in flight are small)
MEM=(--vocab 256 --context 16 -j 1 -b 1 --d-model 128 --layers 16 --heads 4 --d-ff 344 --bucket-mb 0.5 -n 1 -d d)
for z in 0 1 2; do
	mpi2 "${MEM[@]}" --zero $z 2>&1 | sed -n 's/.*gradients \([0-9.]*\) MiB.*optimizer state \([0-9.]*\) MiB.*/\1 \2/p' > mem$z
done
read g0 o0 < mem0; read g1 o1 < mem1; read g2 o2 < mem2
perl -e 'my ($g0, $o0, $g1, $o1, $g2, $o2) = @ARGV; exit(defined $o2 && $g1 == $g0 && $o1 < $o0 &&
	$o2 == $o1 && $g2 < 0.75 * $g1 ? 0 : 1)' "$g0" "$o0" "$g1" "$o1" "$g2" "$o2"
ok $? "memory per rank: gradients $g0, $g1, $g2 MiB and optimizer state $o0, $o1, $o2 MiB with ZeRO-0, 1, 2"
n1=$(grep -o '"grad_norm":[^,]*' z1.jsonl | tail -1 | cut -d: -f2)
n0=$(grep -o '"grad_norm":[^,]*' two.jsonl | tail -1 | cut -d: -f2)
perl -e 'exit(abs($ARGV[0] - $ARGV[1]) <= 1e-12 * abs($ARGV[1]) ? 0 : 1)' "$n1" "$n0"
ok $? "--zero 1: the gradient norm (summed per shard) within 1e-12 of ZeRO-0's ($n1, $n0)"

lm-train "${M[@]}" -n 3 --accum 2 -d d -o mu1 --optimizer muon 2> /dev/null
mpi2 "${M[@]}" -n 3 -d d -o mu2 --optimizer muon > mu2.out 2>&1
is "$(data mu2/step-00000003.safetensors)" "$(data mu1/step-00000003.safetensors)" \
	"--optimizer muon: 2 ranks equal one process, bit for bit"
mpi2 "${M[@]}" -n 3 -d d -o mu3 --optimizer muon --zero 1 > mu3.out 2>&1
[ $? != 0 ] && grep -q "sharded (ZeRO) for AdamW only" mu3.out
ok $? "--zero 1 with Muon is refused, saying why" || sed 's/^/# /' mu3.out | head -3
mpi2 "${M[@]}" -n 3 -d d -o mu4 --optimizer muon --zero 2 > mu4.out 2>&1
[ $? != 0 ] && grep -q "sharded (ZeRO) for AdamW only" mu4.out
ok $? "--zero 2 with Muon is refused alike" || sed 's/^/# /' mu4.out | head -3

mpi2 "${M[@]}" -n 2 -d d -o r --log r.jsonl > r.out 2>&1
lm-train -d d -n 4 -o r --resume --log r.jsonl -j 1 2> r1.err
ok $? "a 2-rank checkpoint resumed on 1 rank" || sed 's/^/# /' r1.err
grep -q "continues on 1: --accum 2 keeps its global batch of 4 windows" r1.err
ok $? "... which takes --accum 2 to keep the global batch, and says so" || sed 's/^/# /' r1.err
mpi2 -d d -n 6 -o r --resume --log r.jsonl -j 1 --zero 1 > r2.out 2>&1
ok $? "... and that checkpoint resumed on 2 ranks with ZeRO-1" || sed 's/^/# /' r2.out | tail
is "$(data r/step-00000006.safetensors)" "$(data one/step-00000006.safetensors)" \
	"the run ends where the uninterrupted one ends, bit for bit"
is "$(curve r.jsonl | nonorm)" "$(curve one.jsonl | grep -v val_loss | nonorm)" "its log is the uninterrupted run's"

# A rank that dies (SIGKILL) or hangs (SIGSTOP): the run ends within the
# timeout, the message names the rank.
rank_pid() { # rank_pid RANK: the pid of lm-train's rank RANK (from its environment)
	local p
	for p in $(pgrep -x lm-train); do
		tr '\0' '\n' 2> /dev/null < /proc/$p/environ | grep -qx "OMPI_COMM_WORLD_RANK=$1" &&
			[ "$(readlink /proc/$p/cwd)" = "$TMP" ] && { echo "$p"; return; }
	done
}
for sig in KILL STOP; do
	setsid mpirun -np 2 lm-train "${M[@]}" -n 1000000 -d d -o f$sig --log f$sig.jsonl --dist-timeout 3 > f$sig.out 2>&1 &
	job=$!
	for _ in $(seq 100); do [ -s f$sig.jsonl ] && grep -q '"step":3' f$sig.jsonl && break; sleep 0.1; done
	p=$(rank_pid 1)
	[ -n "$p" ] && kill -$sig "$p" || kill $job  # no rank 1 found: end the run (and fail)
	start=$(date +%s)
	wait $job
	rc=$?
	took=$(( $(date +%s) - start ))
	# rank 0 gives up after the 3 s; mpirun then ends the job, which can take
	# it several seconds more with a stopped rank (12 to 25 s measured)
	[ "$rc" != 0 ] && [ "$took" -lt 40 ]
	ok $? "SIG$sig to rank 1: the run fails ($rc), $took s later"
	# SIGKILL: mpirun may end the job first, saying which rank died
	grep -Eq "lm-train: rank 0: step [0-9]*: no answer from rank 1 within 3 s|process rank 1 with PID .* exited on signal 9" f$sig.out
	ok $? "SIG$sig: rank 0 (or mpirun) says that rank 1 did not answer" || sed 's/^/# /' f$sig.out | head
done

# SIGTERM to mpirun reaches every rank: they stop at the same step, rank 0
# saves it, and the run resumes from it.
# (in a session of its own: mpirun passes the signal on to its process group)
setsid mpirun -np 2 lm-train "${M[@]}" -n 1000000 -d d -o sg --log sg.jsonl > sg.out 2>&1 &
job=$!
for _ in $(seq 100); do grep -q '"step":3' sg.jsonl 2> /dev/null && break; sleep 0.1; done
kill -TERM $job
wait $job
last=$(readlink sg/latest | sed 's/step-0*\([0-9]*\).safetensors/\1/')
[ -n "$last" ] && [ "$last" = "$(grep -o '"step":[0-9]*' sg.jsonl | tail -1 | cut -d: -f2)" ]
ok $? "SIGTERM to mpirun: rank 0 saved the step the ranks stopped at ($last)" || sed 's/^/# /' sg.out | head -5
mpi2 -d d -o sg --resume -n $((last + 2)) --log sg.jsonl -j 1 > sg2.out 2>&1
ok $? "... and the run resumes from it" || sed 's/^/# /' sg2.out | tail -3

mpirun -np 1 lm-train "${M[@]}" -n 2 -d d : -np 1 lm-train "${M[@]}" -n 2 -d d --lr 1e-3 > cfg.out 2>&1
rc=$?
[ "$rc" != 0 ] && grep -q "lm-train: rank 0: rank 1's configuration (options, model shape, data) differs from rank 0's" cfg.out
ok $? "ranks started with different options: refused, naming the rank" || sed 's/^/# /' cfg.out
run env SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 lm-train "${M[@]}" -n 2 -d d
is "$rc:$err" "2:lm-train: 2 ranks on the CPU need MPI: start them with mpirun or srun --mpi=pmix (slurm gave rank 0 of 2)" \
	"2 Slurm tasks without PMIx on the CPU: a usage error"
run mpirun -np 2 lm-train "${M[@]}" -n 2 -d d --gpus 3
grep -q "lm-train: --gpus 3, but the launcher started 2 ranks (mpirun): give the same number" "$TMP/.err"
ok $? "--gpus N under a launcher of another size: refused" || echo "# $err"
# without -j, a rank takes its share of the host: ranks started unbound each
# took every processor before (N ranks oversubscribing it N times); --gpus N
# starts them unbound; OMP_NUM_THREADS and -j are kept as given
T=("${M[@]/#-j/--seed}") # M without its -j 1: "--seed 1"
threads() { head -1 "$1" | grep -o '[0-9]* OpenMP threads' | cut -d' ' -f1; }
share=$(( $(getconf _NPROCESSORS_ONLN) / 2 )); [ "$share" -ge 1 ] || share=1
mine=$(env -u OMP_NUM_THREADS nproc); [ "$mine" -lt "$share" ] && share=$mine # (a test run under taskset)
mpirun --bind-to none -np 2 lm-train "${T[@]}" -n 1 -d d --log th1.jsonl 2> /dev/null
is "$(threads th1.jsonl)" "$share" "2 unbound ranks without -j: half the host's processors each"
lm-train "${T[@]}" -n 1 -d d --gpus 2 --log th2.jsonl 2> /dev/null
is "$(threads th2.jsonl)" "$share" "--gpus 2 without -j: the same share (not one core each)"
OMP_NUM_THREADS=3 mpirun -x OMP_NUM_THREADS --bind-to none -np 2 lm-train "${T[@]}" -n 1 -d d \
	--log th3.jsonl 2> /dev/null
is "$(threads th3.jsonl)" 3 "OMP_NUM_THREADS=3 is kept"
mpirun --bind-to none -np 2 lm-train "${T[@]}" -n 1 -d d -j 2 --log th4.jsonl 2> /dev/null
is "$(threads th4.jsonl)" 2 "-j 2 is kept"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -n -f "$LMPIPE_ROOT/pipelines/pretrain.mk" W="$TMP/pm" LAUNCH='mpirun -np 2' GPUS=2 \
	"$TMP/pm/ckpt/.done" 2> /dev/null | grep -q "mpirun -np 2 [^ ]*/lm-train --gpus 2 "
ok $? "pipelines/pretrain.mk: LAUNCH= goes before lm-train, GPUS=N becomes --gpus N"
done_testing
