#!/bin/sh
# tests/gpu/rl-update-cuda.t: rl-update --device cuda against --device cpu
# on the same rollouts and records: GRPO (with the KL penalty's reference
# pass), SFT, DPO and PPO (with the entropy bonus) give a loss and a
# gradient norm within 3 % of the CPU's (bf16 products), in micro-batches
# of 4 and of all sequences.  Needs a GPU.
. "$(dirname "$0")/../lib.sh"

need_gpu
cd "$TMP"
perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
perl "$LMPIPE_ROOT/tests/mktext.pl" 2000 1 | perl "$LMPIPE_ROOT/tests/bytes2tok.pl" > text.tok
shard-pack -o d < text.tok
lm-train --vocab 256 --context 128 --d-model 128 --layers 2 --heads 4 --d-ff 352 -b 16 -n 100 \
	--lr 3e-3 --warmup 10 -d d -o ck --ckpt-every 100 2>/dev/null
ok $? "a small byte-level model"
printf '%s\n' '{"prompt":"Max"}' '{"prompt":"Sam lost a"}' '{"prompt":"Tom wanted a big"}' \
	'{"prompt":"Once upon a time, Ann saw a"}' > p.jsonl
lm-sample -c ck/latest -t byte.tok --jsonl -i p.jsonl -n 8 --max-tokens 24 --seed 3 > ro.jsonl 2>/dev/null &&
	rl-reward -c 'perl -ne "print length(\$_) % 2, qq(\n)"' ro.jsonl > sc.jsonl
ok $? "rollouts and rewards"
printf '%s\n' '{"prompt":"Max saw a","response":" big kite."}' '{"prompt":"Tom","response":" lost a red boat."}' \
	'{"prompt":"Sam had","response":" a ball and a very long stick."}' > sft.jsonl
printf '%s\n' '{"prompt":"Max saw a","chosen":" big kite.","rejected":" red boat that sank."}' \
	'{"prompt":"Tom lost a","chosen":" cake.","rejected":" old box."}' > dpo.jsonl
field() { printf '%s\n' "$1" | perl -ne "print \$1 if /\"$2\":(-?[0-9.e+-]+)/"; }

both() { # both NAME OPTION...: CPU and CUDA, micro-batches 4 and all
	name=$1; shift
	for mb in 4 1000; do
		run rl-update --device cpu -c ck/latest -o "c$name$mb" --micro-batch $mb "$@"
		c=$out
		run rl-update --device cuda -c ck/latest -o "g$name$mb" --micro-batch $mb "$@"
		[ "$rc" = 0 ] || { ok 1 "$name on CUDA, micro-batch $mb: $err"; continue; }
		for k in loss grad_norm; do
			a=$(field "$c" $k) b=$(field "$out" $k)
			# GRPO's first-step loss is about 0 (advantages of mean 0, the
			# policy equal to the reference): an absolute 1e-3 beside the 3 %
			perl -e "exit !(abs($b - $a) <= 0.03 * abs($a) + 1e-3)"
			ok $? "$name, micro-batch $mb: CUDA $k $b, CPU $a"
		done
	done
}
both grpo --kl 0.05 --ref ck/latest sc.jsonl
both sft -a sft -t byte.tok sft.jsonl
both dpo -a dpo -t byte.tok --ref ck/latest dpo.jsonl
both ppo -a ppo --ent-coef 0.01 --kl 0.05 --ref ck/latest sc.jsonl
done_testing
