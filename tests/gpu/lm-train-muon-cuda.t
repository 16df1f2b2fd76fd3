#!/bin/sh
# tests/gpu/lm-train-muon-cuda.t: lm-train --optimizer muon --device cuda
# (bf16 Newton-Schulz, batched by shape) against --device cpu (fp32) on the
# same byte-level shards and seed: 200 steps of a small model, the
# validation loss within 3 % of the CPU run's at every evaluation (bf16
# orthogonalisation is 1-2 % off fp32 per step, as torch's own is), also
# with one matrix a batched call on 8 streams (LMPIPE_MUON_CHUNK=1) and
# with a shape and its transpose apart (LMPIPE_MUON_MERGE=0); the
# loss falls; a CUDA Muon checkpoint resumes on the CPU; --profile has a
# Muon row.  Needs a GPU.
. "$(dirname "$0")/../lib.sh"

need_gpu
cd "$TMP"
STEPS=200 EVERY=20 LINES=4000
byte_shards $LINES

train() { # train DEVICE DIR LOG [OPTION]...
	dev=$1 dir=$2 log=$3; shift 3
	lm-train --device "$dev" --vocab 256 --context 64 --d-model 128 --layers 2 --heads 4 \
		--d-ff 352 -b 16 -n $STEPS --lr 3e-3 --warmup 20 --optimizer muon --muon-lr 0.02 \
		--muon-momentum-start 0.85 --muon-momentum-warmup 50 -d d --val d-val \
		--eval-every $EVERY -o "$dir" --ckpt-every 100 --log "$log" "$@"
}
run train cpu c c.jsonl
is "$rc" 0 "CPU Muon training runs ($err)"
run train cuda g g.jsonl
is "$rc" 0 "CUDA Muon training runs ($err)"
val() { sed -n 's/.*"step":\([0-9]*\),"val_loss":\([0-9.e+-]*\).*/\1 \2/p' "$1"; }
within() { # within CPU-LOG CUDA-LOG: every evaluation within 3 % (rc, msg)
val "$1" > a.txt
val "$2" > b.txt
msg=$(perl -e 'open A, $ARGV[0]; open B, $ARGV[1]; my ($n, $worst, $at) = (0, 0, 0);
	while (defined(my $a = <A>)) { my $b = <B>; exit 2 unless defined $b;
		my ($sa, $la) = split " ", $a; my ($sb, $lb) = split " ", $b;
		exit 3 if $sa != $sb; my $r = abs($la - $lb) / $la; $n++;
		($worst, $at) = ($r, $sa) if $r > $worst; }
	printf "%d evaluations, worst %.4f at step %d\n", $n, $worst, $at; exit($worst > 0.03)' a.txt b.txt); rc=$?
}
within c.jsonl g.jsonl
ok $rc "validation loss within 3 % of the CPU run at every evaluation ($msg)"
first=$(head -1 b.txt | cut -d' ' -f2) last=$(tail -1 b.txt | cut -d' ' -f2)
perl -e "exit !($last < 0.5 * $first)"
ok $? "the CUDA Muon run learns: validation loss $first at step $EVERY, $last at step $STEPS"

# one matrix a call, on 8 streams (LMPIPE_MUON_CHUNK, LMPIPE_MUON_LANES)
export LMPIPE_MUON_CHUNK=1 LMPIPE_MUON_LANES=8
run train cuda g1 g1.jsonl
unset LMPIPE_MUON_CHUNK LMPIPE_MUON_LANES
is "$rc" 0 "CUDA Muon, one matrix a call on 8 streams, runs ($err)"
within c.jsonl g1.jsonl
ok $rc "... and its validation loss is within 3 % of the CPU run's at every evaluation ($msg)"

# d_ff x d and d x d_ff in sets of their own (LMPIPE_MUON_MERGE=0; by
# default one set, down's matrices flipped through tiles)
export LMPIPE_MUON_MERGE=0
run train cuda g0 g0.jsonl
unset LMPIPE_MUON_MERGE
is "$rc" 0 "CUDA Muon, shapes and their transposes apart, runs ($err)"
within c.jsonl g0.jsonl
ok $rc "... and its validation loss is within 3 % of the CPU run's at every evaluation ($msg)"

mkdir gc && cp g/step-00000100.safetensors gc/ && ln -s step-00000100.safetensors gc/latest
run train cpu gc gc.jsonl --resume
is "$rc" 0 "a CUDA Muon checkpoint resumes on the CPU ($err)"

run lm-train --device cuda --vocab 256 --context 64 --d-model 128 --layers 2 --heads 4 --d-ff 352 \
	-b 16 -n 6 -d d --optimizer muon --profile 5
case $err in *"Muon "*) ok 0 "--profile has a Muon row: $(printf '%s\n' "$err" | grep '^Muon ')" ;;
	*) ok 1 "--profile has a Muon row: $err" ;; esac
done_testing
