#!/bin/bash
# tests/lm-train-slurm.t: lm-train's data parallel ranks started by Slurm
# (issue 18): a single-node Slurm on this host (tests/slurm.sh), then
# `srun --mpi=pmix -n 2 lm-train --device cpu` on the tiny model; its loss
# curve and final weights and optimizer state are those of one process with
# --accum 2, bit for bit (sums in rank order, libcommon/dist), and so is
# the example batch script pipelines/train.sbatch's.  Skips, saying why,
# without Slurm, MPI or Slurm's PMIx plugin.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm.sh"
command -v mpirun > /dev/null || skip "no OpenMPI (pipelines/deps.sh installs openmpi-bin, libopenmpi-dev)"
ldd "$LMPIPE_BIN/lm-train" | grep -q libmpi || skip "lm-train was built without MPI"
[ "${LMPIPE_SANITIZE:-0}" = 1 ] && export ASAN_OPTIONS=detect_leaks=0  # OpenMPI's own allocations
cd "$TMP" || exit 1
slurm_up
srun --mpi=list 2>&1 | grep -q pmix || skip "Slurm has no PMIx plugin (srun --mpi=list)"
perl "$LMPIPE_ROOT/tests/mktext.pl" 600 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d --val-docs 20 < text.tok
M=(-m tiny --vocab 256 --context 16 -j 1 --lr 3e-3 -n 4 -b 2 --bucket-mb 0.02 --dist-timeout 20)
data() { perl "$LMPIPE_ROOT/tests/st_data.pl" "$1"; }
curve() { grep '"step"' "$1" | sed 's/,"tokens_per_s".*//'; }

lm-train "${M[@]}" --accum 2 -d d -o one --log one.jsonl 2> one.err
ok $? "one process, --accum 2" || sed 's/^/# /' one.err
srun --mpi=pmix -n 2 lm-train "${M[@]}" -d d -o two --log two.jsonl > srun.out 2>&1
ok $? "srun --mpi=pmix -n 2 lm-train" || sed 's/^/# /' srun.out | tail
is "$(curve two.jsonl)" "$(curve one.jsonl)" "its loss curve is one process's"
is "$(data two/step-00000004.safetensors)" "$(data one/step-00000004.safetensors)" \
	"its weights and optimizer state are one process's, bit for bit"

jid=$(sbatch --parsable --ntasks=2 --output="$TMP/sbatch.log" "$LMPIPE_ROOT/pipelines/train.sbatch" \
	"${M[@]}" -d d -o batch 2> sbatch.err)
ok $? "pipelines/train.sbatch submitted" || sed 's/^/# /' sbatch.err
while squeue -h -j "${jid%%;*}" 2> /dev/null | grep -q .; do sleep 0.3; done
is "$(data batch/step-00000004.safetensors 2> /dev/null)" "$(data one/step-00000004.safetensors)" \
	"the example batch script's run equals it too" || sed 's/^/# /' sbatch.log | tail
done_testing
