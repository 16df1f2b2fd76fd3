#!/bin/sh
# tests/gpu/lm-train-dp-cuda.t: data parallel lm-train on CUDA at a world
# of one (issue 18; one GPU): --gpus 1 (the NCCL path: buckets summed on
# NCCL's own stream, waited for by the compute stream) and --zero 1 / 2
# (the AdamW step on the shard, the weights gathered; ZeRO-2 with the
# gradients in range buffers, also with tied embeddings) against plain
# training of the same seed: every step's loss within 2 % (the CUDA run
# itself moves by about half a percent between runs, lm-train-cuda.t), and
# the cost in tokens/s of each beside plain training on a larger model
# (the issue's target: at most 2 %; printed, and failed above 5 % so that a
# busy machine does not fail it); then NCCL's id through each --nccl-init
# method: file:PATH, tcp:HOST:PORT and mpi (mpirun -np 1; skipped without
# mpirun or an MPI build).  Needs a GPU.
. "$(dirname "$0")/../lib.sh"

need_gpu
cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 4000 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d --val-docs 100 < text.tok
ok $? "byte-level shards"
SMALL="--device cuda --vocab 256 --context 64 --d-model 128 --layers 2 --heads 4 --d-ff 352 -b 16 -n 100 --lr 3e-3 --warmup 10 -d d"
losses() { sed -n 's/.*"step":\([0-9]*\),"loss":\([0-9.e+-]*\).*/\1 \2/p' "$1"; }
within() { # within A.jsonl B.jsonl LIMIT: every step's loss within LIMIT (relative)
	losses "$1" > a.txt
	losses "$2" > b.txt
	perl -e 'open A, $ARGV[0]; open B, $ARGV[1]; my ($n, $worst) = (0, 0);
		while (defined(my $a = <A>)) { my $b = <B>; exit 2 unless defined $b;
			my ($sa, $la) = split " ", $a; my ($sb, $lb) = split " ", $b;
			exit 3 if $sa != $sb; my $r = abs($la - $lb) / $la; $n++;
			$worst = $r if $r > $worst; }
		print "# $n steps, worst relative difference $worst\n"; exit($n && $worst <= $ARGV[2] ? 0 : 1)' \
		a.txt b.txt "$3"
}
run lm-train $SMALL -o plain --log plain.jsonl
is "$rc" 0 "plain CUDA training ($err)"
for v in "--gpus 1" "--gpus 1 --zero 1" "--gpus 1 --zero 2" "--zero 1 --bucket-mb 0.05" \
	"--gpus 1 --zero 2 --bucket-mb 0.05"; do
	name=$(echo "$v" | tr -d ' -.')
	run lm-train $SMALL $v -o "$name" --log "$name.jsonl"
	is "$rc" 0 "$v: runs ($err)"
	within plain.jsonl "$name.jsonl" 0.02
	ok $? "$v: every step's loss within 2 % of plain training"
done
# ZeRO-2's gradients in range buffers (a bucket of 0.05 MiB: a range per
# layer, the buffers taken in turn), with tied embeddings too (the
# embedding's range written by the head's backward pass first)
grep -q "ZeRO-2, per rank: .*gradients [0-9.]* MiB (this rank's shard and the range buffers in flight)" "$TMP/.err"
ok $? "--zero 2: the memory line says the gradients are sharded" || echo "# $err"
run lm-train $SMALL --tie-embeddings -o tied --log tied.jsonl
is "$rc" 0 "plain CUDA training, tied embeddings ($err)"
run lm-train $SMALL --tie-embeddings --gpus 1 --zero 2 --bucket-mb 0.05 -o tiedz2 --log tiedz2.jsonl
is "$rc" 0 "--zero 2, tied embeddings: runs ($err)"
within tied.jsonl tiedz2.jsonl 0.02
ok $? "--zero 2, tied embeddings: every step's loss within 2 % of plain training"

# The cost: tokens/s of the last 40 of 60 steps, a model large enough to time.
BIG="--device cuda --vocab 256 --context 256 --d-model 512 --layers 4 --heads 8 --d-ff 1376 -b 32 -n 60 -d d"
rate() { grep '"step"' "$1" | tail -40 | sed 's/.*"tokens_per_s":\([0-9.]*\).*/\1/' |
	awk '{ s += $1; n++ } END { printf "%.0f", n ? s / n : 0 }'; }
# Plain runs before and after each variant, the variant against their
# mean: the H200 slows down as it warms over the runs, which a single
# plain run first would count against the later variants.
lm-train $BIG --log big-plain0.jsonl 2> /dev/null
prev=$(rate big-plain0.jsonl)
i=0
for v in "--gpus 1" "--gpus 1 --zero 1" "--gpus 1 --zero 2" "--zero 1" "--zero 2"; do
	name=$(echo "$v" | tr -d ' -')
	lm-train $BIG $v --log "big-$name.jsonl" 2> /dev/null
	r=$(rate "big-$name.jsonl")
	i=$((i + 1))
	lm-train $BIG --log "big-plain$i.jsonl" 2> /dev/null
	next=$(rate "big-plain$i.jsonl")
	base=$(( (prev + next) / 2 ))
	prev=$next
	perl -e 'printf "# %s: %.0f tokens/s against %.0f plain: %+.2f %% (the issue: at most 2 %%)\n", @ARGV[0..2], 100 * ($ARGV[1] / $ARGV[2] - 1)' -- "$v" "$r" "$base"
	perl -e 'exit($ARGV[0] >= 0.95 * $ARGV[1] ? 0 : 1)' "$r" "$base"
	ok $? "$v: tokens/s within 5 % of plain training ($r against $base)"
done

# NCCL's unique id, each way, at a world of one.
SHORT="$SMALL -n 3"
run lm-train $SHORT --nccl-init "file:$TMP/nccl.id" -o fi
is "$rc" 0 "--nccl-init file:PATH ($err)"
[ ! -e "$TMP/nccl.id" ]; ok $? "... the id file is removed once the ranks joined"
port=$(perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1")->sockport')
run lm-train $SHORT --nccl-init "tcp:127.0.0.1:$port" -o tc
is "$rc" 0 "--nccl-init tcp:HOST:PORT ($err)"
if command -v mpirun > /dev/null && ldd "$LMPIPE_BIN/lm-train" | grep -q libmpi; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	run mpirun -np 1 lm-train $SHORT --nccl-init mpi -o mp
	is "$rc" 0 "--nccl-init mpi under mpirun -np 1 ($err)"
else
	echo "ok $((_tap_n += 1)) # SKIP --nccl-init mpi: no mpirun or lm-train built without MPI"
fi
run lm-train $SHORT --nccl-init mpi -o nompi
is "$rc" 2 "--nccl-init mpi without a launcher: a usage error ($err)"
done_testing
