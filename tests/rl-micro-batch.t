#!/bin/sh
# tests/rl-micro-batch.t: rl-update --micro-batch changes memory, not the
# update: SFT, DPO, GRPO (with the KL penalty's reference pass) and PPO
# (with the entropy bonus, whose gradient is computed on the device) give
# the same loss, gradient norm and weights, within 1e-5 relative, with 1,
# 4 and all sequences per forward pass, on sequences of different lengths
# (the padded ones must not count).  AdamW's first step is about lr times
# the sign of each gradient, which float rounding flips where a gradient is
# near 0, so the runs use --eps 1 --lr 1: then the step is g / (|g| + 1),
# about the gradient, and large enough to stand above the weights' float
# rounding, so the weights compare the gradients.  A planted fault (a
# learning rate 0.1 % larger) shows the comparison can fail.  PPO runs one
# epoch and two; the second epoch starts from weights the first moved, and
# at --lr 1 those moves grow the first epoch's rounding past 1e-5 (8e-5
# measured with the sanitizers' build on an AMD EPYC), so the two-epoch run
# takes --lr 0.3 (3e-6 there).
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1

perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
perl "$LMPIPE_ROOT/tests/mktext.pl" 600 1 | perl "$LMPIPE_ROOT/tests/bytes2tok.pl" > text.tok
shard-pack -o d < text.tok 2>/dev/null || { echo "1..0 # SKIP shard-pack failed"; exit 0; }
lm-train -m tiny --vocab 256 --context 64 -b 16 -n 30 --lr 1e-2 --warmup 10 -d d -o ck \
	--ckpt-every 30 -j 1 2>/dev/null
ok $? "a tiny byte-level model to start from" || { done_testing; exit 1; }

# prompts of different lengths, 4 samples each: 24 rollouts, rewards by parity
printf '%s\n' '{"prompt":"Max"}' '{"prompt":"Sam lost a"}' '{"prompt":"Tom wanted a big"}' \
	'{"prompt":"Kim"}' '{"prompt":"Once upon a time, Ann saw a"}' '{"prompt":"The dog"}' > p.jsonl
lm-sample -c ck/latest -t byte.tok --jsonl -i p.jsonl -n 4 --max-tokens 12 --seed 3 > ro.jsonl 2>/dev/null &&
	rl-reward -c 'perl -ne "print length(\$_) % 2, qq(\n)"' ro.jsonl > sc.jsonl
ok $? "rollouts and rewards"
printf '%s\n' '{"prompt":"Max saw a","response":" big kite."}' '{"prompt":"Tom","response":" lost a red boat."}' \
	'{"prompt":"Once upon a time","response":" a cat."}' '{"prompt":"Kim","response":" ran."}' \
	'{"prompt":"Sam had","response":" a ball and a very long stick."}' > sft.jsonl
printf '%s\n' '{"prompt":"Max saw a","chosen":" big kite.","rejected":" red boat that sank."}' \
	'{"prompt":"Tom lost a","chosen":" cake.","rejected":" old box."}' \
	'{"prompt":"Once upon a time","chosen":" a cat sat.","rejected":" no."}' > dpo.jsonl

# The largest relative difference between the metrics (loss, grad_norm) and
# between the weight updates (new - start, over the model's and the value
# head's tensors, relative to the largest update) of two runs.
cat > cmp.pl <<'PERL'
use strict;
sub st { my ($f) = @_; open my $h, '<', $f or die "$f: $!"; binmode $h; local $/;
	my $b = <$h>; my $n = unpack 'Q<', substr $b, 0, 8; my $j = substr $b, 8, $n; my %t;
	while ($j =~ /"((?:model\.|lm_head|value_head)[^"]*)":\{"dtype":"F32","shape":\[[^]]*\],"data_offsets":\[(\d+),(\d+)\]/g) {
		$t{$1} = [unpack 'f<*', substr $b, 8 + $n + $2, $3 - $2] }
	return \%t }
sub field { my ($l, $k) = @_; $l =~ /"$k":(-?[0-9.e+-]+)/ ? $1 : 'nan' }
my ($base, $a, $ma, $b, $mb) = @ARGV;
my ($t0, $ta, $tb) = (st($base), st($a), st($b));
my ($max, $diff, $n) = (0, 0, 0);
for my $k (keys %$ta) {
	my $z = $t0->{$k} // [(0) x @{$ta->{$k}}];
	for my $i (0 .. $#{$ta->{$k}}) {
		my ($da, $db) = ($ta->{$k}[$i] - $z->[$i], $tb->{$k}[$i] - $z->[$i]);
		$max = abs $da if abs $da > $max; $diff = abs($da - $db) if abs($da - $db) > $diff; $n++ } }
my $rel = $max > 0 ? $diff / $max : ($diff > 0 ? 1 : 0);
for my $k (qw(loss grad_norm)) {
	my ($x, $y) = (field($ma, $k), field($mb, $k));
	my $r = abs($x - $y) / (abs($x) > 1e-30 ? abs($x) : 1);
	$rel = $r if $r > $rel }
printf "%.3g %d\n", $rel, $n;
PERL

# same ALGO-NAME OPTIONS...: runs rl-update with --micro-batch 1, 4 and 1000
# (all), and compares 4 and all with 1
same() {
	name=$1; shift
	for mb in 1 4 1000; do
		run rl-update -c ck/latest -o "$name$mb" -j 1 --lr 1 --eps 1 --micro-batch $mb "$@"
		[ "$rc" = 0 ] || { ok 1 "$name, micro-batch $mb: $err"; return; }
		echo "$out" > "$name$mb.m"
	done
	for mb in 4 1000; do
		r=$(perl cmp.pl ck/latest "$name"1/latest "$(cat "$name"1.m)" "$name$mb/latest" "$(cat "$name$mb.m")")
		perl -e "exit !(${r% *} <= 1e-5 && ${r#* } > 0)"
		ok $? "$name: micro-batch $mb gives the update of micro-batch 1 (largest relative difference ${r% *}, ${r#* } weights)"
	done
}
same grpo -b 8 --kl 0.05 --ref ck/latest sc.jsonl
same grpo-dr -b 8 --no-std --agg normalize -l reinforce_with_baseline sc.jsonl
same sft -a sft -t byte.tok -b 2 sft.jsonl
same dpo -a dpo -t byte.tok --ref ck/latest --beta 0.5 dpo.jsonl
same ppo -a ppo -b 12 -e 1 --whiten --ent-coef 0.01 --kl 0.05 --ref ck/latest sc.jsonl
same ppo-2epochs -a ppo -b 12 -e 2 --lr 0.3 --whiten --ent-coef 0.01 --kl 0.05 --ref ck/latest sc.jsonl

run rl-update -c ck/latest -o planted -j 1 --lr 1.001 --eps 1 --micro-batch 4 -b 8 --kl 0.05 --ref ck/latest sc.jsonl
r=$(perl cmp.pl ck/latest grpo1/latest "$(cat grpo1.m)" planted/latest "$out")
perl -e "exit !(${r% *} > 1e-5)"
ok $? "a different update is told apart (relative difference ${r% *})"
run rl-update -c ck/latest -o x --micro-batch 0 sc.jsonl
is "$rc" 2 "--micro-batch 0: exit 2"
done_testing
