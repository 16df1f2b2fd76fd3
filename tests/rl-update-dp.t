#!/bin/bash
# tests/rl-update-dp.t: rl-update data parallel on the CPU over OpenMPI
# (issue 18).  Two ranks (mpirun -np 2, and rl-update --gpus 2, which execs
# it) each run their half of every batch's micro-batches, and with one
# micro-batch a rank per batch they equal one process bit for bit: SFT,
# GRPO (grpo_clip), DPO and PPO, the checkpoint's weights and optimizer
# state (and value head), and the metrics line but for the last digits of
# the sums and the time; a run of another batch differs (the comparison
# can fail); a rank without a micro-batch joins the sums.  With two
# micro-batches a rank the grouping of the sums
# differs: the gradient norm within 1e-5.  Only rank 0 writes the checkpoint and
# the metrics; stdin is refused on two ranks.  Skips without mpirun or an
# MPI build.
. "$(dirname "$0")/lib.sh"
skip() { echo "1..0 # SKIP $*"; exit 0; }
command -v mpirun > /dev/null || skip "no mpirun (pipelines/deps.sh installs openmpi-bin, libopenmpi-dev)"
ldd "$LMPIPE_BIN/rl-update" | grep -q libmpi || skip "rl-update was built without MPI (make MPI=0)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ "${LMPIPE_SANITIZE:-0}" = 1 ] && export ASAN_OPTIONS=detect_leaks=0  # OpenMPI's own allocations
cd "$TMP" || exit 1
perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
perl "$LMPIPE_ROOT/tests/mktext.pl" 400 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d < text.tok 2> /dev/null
lm-train -m tiny --vocab 256 --context 64 -b 8 -n 20 --lr 1e-2 -d d -o ck -j 1 2> /dev/null
ok $? "a tiny byte-level model to start from" || { done_testing; exit 1; }
data() { perl "$LMPIPE_ROOT/tests/st_data.pl" "$1"; }
# the metrics line without what may differ in the last digits or is the time
metrics() { perl -pe 's/"(seconds|checkpoint)":[^,}]*,?//g; s/(-?\d+\.\d+(e[-+]?\d+)?)/sprintf "%.5g", $1/ge' "$1"; }
field() { perl -ne "print \$1 if /\"$2\":(-?[0-9.e+-]+)/" "$1"; }
mpi2() { mpirun -np 2 rl-update "$@"; }

printf '%s\n' '{"prompt":"Max saw a","response":" big kite."}' '{"prompt":"Tom lost a","response":" red boat."}' \
	'{"prompt":"Sam had a","response":" small dog."}' '{"prompt":"Kim made a","response":" blue hat."}' \
	'{"prompt":"Ann got a","response":" new ball."}' '{"prompt":"Ben saw a","response":" tall tree."}' \
	'{"prompt":"Lily had a","response":" pink cup."}' '{"prompt":"Tim lost a","response":" old key."}' > sft.jsonl
printf '%s\n' '{"prompt":"Max saw a"}' '{"prompt":"Sam lost a"}' > p.jsonl
lm-sample -c ck/latest -t byte.tok --jsonl -i p.jsonl -n 8 --max-tokens 8 --seed 3 > ro.jsonl 2> /dev/null &&
	rl-reward -c 'perl -ne "print /\"completion\":\"[^\"]*a/ ? 1 : 0, qq(\n)"' ro.jsonl > sc.jsonl
ok $? "16 scored rollouts"
grep -q '"reward":1' sc.jsonl && grep -q '"reward":0' sc.jsonl
ok $? "... with rewards 0 and 1 (completions with an a), so that GRPO has advantages"
perl -ne 'BEGIN { @c = (" big kite.", " red boat.", " small dog.", " blue hat.") }
	/"prompt":("[^"]*")/ and printf "{\"prompt\":%s,\"chosen\":\"%s\",\"rejected\":\"%s\"}\n", $1, $c[$. % 4], $c[($. + 1) % 4]' \
	sft.jsonl > dpo.jsonl

# name, options: each batch is two micro-batches, one a rank
cases=(
	"SFT|-a sft -t byte.tok -b 4 -m 2 -e 2 --lr 5e-3 sft.jsonl"
	"GRPO|-b 8 -m 4 -e 2 --lr 5e-3 sc.jsonl"
	"DPO|-a dpo -t byte.tok --ref ck/latest -b 2 -m 2 -e 2 --lr 5e-3 dpo.jsonl"
	"PPO|-a ppo -b 8 -m 4 --lr 5e-3 sc.jsonl"
)
for c in "${cases[@]}"; do
	name=${c%%|*} opts=${c#*|} dir=$(echo "$name" | tr A-Z a-z)
	rl-update -c ck/latest -o "$dir-1" -j 1 $opts > "$dir-1.json" 2> "$dir-1.err"
	ok $? "$name: one process" || sed 's/^/# /' "$dir-1.err"
	mpi2 -c ck/latest -o "$dir-2" -j 1 $opts > "$dir-2.json" 2> "$dir-2.err"
	ok $? "$name: mpirun -np 2 rl-update" || sed 's/^/# /' "$dir-2.err"
	f=$(readlink "$dir-1/latest")
	is "$(data "$dir-2/$f")" "$(data "$dir-1/$f")" "$name: 2 ranks write the weights and optimizer state of one process, bit for bit"
	is "$(metrics "$dir-2.json")" "$(metrics "$dir-1.json")" "$name: and its metrics line (once, from rank 0)"
done
last() { echo "$1/$(readlink "$1/latest")"; }
rl-update -c ck/latest -o sft-b -j 1 -a sft -t byte.tok -b 8 -m 4 -e 4 --lr 5e-3 sft.jsonl > /dev/null 2>&1
[ "$(data "$(last sft-b)")" != "$(data "$(last sft-1)")" ]
ok $? "SFT of another batch differs (the comparison can fail)"
[ "$(ls sft-2 | wc -l)" = 2 ]
ok $? "one checkpoint and latest in the output directory" || ls sft-2 | sed 's/^/# /'
rl-update -c ck/latest -o g -j 1 -a sft -t byte.tok -b 4 -m 2 -e 2 --lr 5e-3 --gpus 2 sft.jsonl > g.json 2> g.err
is "$(data "$(last g)")" "$(data "$(last sft-1)")" \
	"--gpus 2 (which execs mpirun -np 2) trains the same"

# one micro-batch a batch: rank 1 has none of its own and joins the sums
rl-update -c ck/latest -o w1 -j 1 -a sft -t byte.tok -m 8 --lr 5e-3 sft.jsonl > /dev/null 2>&1
mpi2 -c ck/latest -o w2 -j 1 -a sft -t byte.tok -m 8 --lr 5e-3 sft.jsonl > w2.json 2> w2.err
is "$(data "$(last w2)")" "$(data "$(last w1)")" "a batch of one micro-batch on 2 ranks: rank 1 idle, the result one process's"

# two micro-batches a rank: the sums grouped otherwise
rl-update -c ck/latest -o m1 -j 1 -b 8 -m 2 -e 2 --lr 5e-3 sc.jsonl > m1.json 2> /dev/null
mpi2 -c ck/latest -o m2 -j 1 -b 8 -m 2 -e 2 --lr 5e-3 sc.jsonl > m2.json 2> m2.err
l1=$(field m1.json grad_norm) l2=$(field m2.json grad_norm)
perl -e 'exit($ARGV[0] > 0 && abs($ARGV[0] - $ARGV[1]) <= 1e-5 * abs($ARGV[0]) ? 0 : 1)' "$l1" "$l2"
ok $? "GRPO with two micro-batches a rank: the gradient norm within 1e-5 of one process's ($l2, $l1)"

mpi2 -c ck/latest -o x -j 1 < sc.jsonl > in.out 2>&1
rc=$?
[ "$rc" != 0 ] && grep -q "rl-update: 2 ranks read the records from stdin, which the launcher gives to rank 0 only: give them as FILE" in.out
ok $? "records on stdin with 2 ranks: a usage error" || sed 's/^/# /' in.out | head -3
run mpirun -np 2 rl-update -c ck/latest -o x -j 1 --gpus 3 sc.jsonl
grep -q "rl-update: --gpus 3, but the launcher started 2 ranks (mpirun): give the same number" "$TMP/.err"
ok $? "--gpus N under a launcher of another size: refused" || echo "# $err"
done_testing
