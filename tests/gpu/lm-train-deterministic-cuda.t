#!/bin/sh
# tests/gpu/lm-train-deterministic-cuda.t: lm-train --device cuda
# --deterministic twice, 30 steps of a small model on byte-level shards
# (head dimension 32 at T = 128, the short attention of the learn-ts
# recipe's shape, which sums in a fixed order): the two runs' checkpoints
# are byte-identical and their logs' losses, gradient norms and validation
# losses equal bit for bit; the same with --accum 2.  Then (informational,
# not a failure) whether two runs without the flag differ, which says
# whether the flag is needed at all on this GPU.  Last, the same pair on
# the flash kernels, whose backward sums dq per key block in a fixed order
# under the flag (lm-train(1), DETERMINISM): head dimension 64 at T = 128;
# a gpt2s-like shape (head dimension 64, T = 1024: eight key blocks); and
# grouped-query attention at head dimension 128, T = 1024.  Needs a GPU.
. "$(dirname "$0")/../lib.sh"

need_gpu
cd "$TMP"
LINES=3000
byte_shards $LINES

train() { # train DIR [OPTION]...: 30 steps on CUDA, the log in DIR.jsonl
	dir=$1; shift
	lm-train --device cuda --vocab 256 --context 128 --d-model 128 --layers 2 --heads 4 \
		--d-ff 352 -b 32 -n 30 --lr 3e-3 --warmup 5 -d d --val d-val --eval-every 10 \
		-o "$dir" --log "$dir.jsonl" "$@"
}
# the log without its timings and device line
strip() { grep -v '"device"\|peak_device' "$1" | sed 's/,"tokens_per_s[^}]*//'; }
same_runs() { # same_runs A B WHAT
	cmp -s "$1/step-00000030.safetensors" "$2/step-00000030.safetensors"
	ok $? "$3: the two runs' checkpoints are byte-identical"
	strip "$1.jsonl" > "$1.txt"
	strip "$2.jsonl" > "$2.txt"
	cmp -s "$1.txt" "$2.txt"
	ok $? "$3: their logs' losses, gradient norms and validation losses are bit-identical ($(wc -l < "$1.txt") lines)"
}
for a in a b; do
	run train "det-$a" --deterministic
	is "$rc" 0 "--deterministic run $a ($err)"
done
same_runs det-a det-b "--deterministic"
for a in a b; do
	run train "acc-$a" --deterministic -b 16 --accum 2
	is "$rc" 0 "--deterministic --accum 2 run $a ($err)"
done
same_runs acc-a acc-b "--deterministic --accum 2"
grep -q '"device":"cuda"' det-a.jsonl
ok $? "the runs were on CUDA"

for a in a b; do
	run train "fast-$a"
	is "$rc" 0 "a run without --deterministic ($a) ($err)"
done
if cmp -s fast-a/step-00000030.safetensors fast-b/step-00000030.safetensors; then
	echo "# without --deterministic the two runs happened to be identical too"
else
	echo "# without --deterministic the two runs differ (expected: atomic sums)"
fi
l1=$(sed -n 's/.*"step":30,"loss":\([0-9.e+-]*\).*/\1/p' det-a.jsonl)
l2=$(sed -n 's/.*"step":30,"loss":\([0-9.e+-]*\).*/\1/p' fast-a.jsonl)
perl -e 'exit !(abs($ARGV[0] - $ARGV[1]) <= 0.02 * $ARGV[1])' "$l1" "$l2"
ok $? "--deterministic trains like the default (step 30: $l1 vs $l2)"

for a in a b; do
	run train "d64-$a" --deterministic --heads 2
	is "$rc" 0 "--deterministic at head dimension 64, run $a ($err)"
done
same_runs d64-a d64-b "--deterministic, head dimension 64"
# gpt2s's heads (D = 64) at its context, a small model
for a in a b; do
	run train "g2s-$a" --deterministic --context 1024 --d-model 256 --heads 4 --d-ff 688 -b 4
	is "$rc" 0 "--deterministic at D = 64, T = 1024, run $a ($err)"
done
same_runs g2s-a g2s-b "--deterministic, D = 64, T = 1024"
for a in a b; do
	run train "gqa-$a" --deterministic --context 1024 --d-model 256 --heads 2 --kv-heads 1 \
		--d-ff 688 -b 4
	is "$rc" 0 "--deterministic with GQA at D = 128, T = 1024, run $a ($err)"
done
same_runs gqa-a gqa-b "--deterministic, GQA (2 heads, 1 kv head), D = 128, T = 1024"
done_testing
