#!/bin/sh
# tests/rl-finite.t: rl-update on hostile numbers (issue 22): a reward of
# +-1e308 or a log-prob of -1e308 in the rollouts must stop rl-update with a
# message naming the record or the step, and write nothing (no checkpoint,
# no metrics), as lm-train stops on a non-finite loss.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1

perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
perl "$LMPIPE_ROOT/tests/mktext.pl" 200 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d < text.tok
lm-train -m tiny --vocab 256 --context 32 -b 4 -n 2 --warmup 1 -d d -o ck --ckpt-every 2 \
	-j 1 2>/dev/null
ok $? "a tiny checkpoint" || { done_testing; exit 1; }
printf '%s\n' '{"prompt":"Max saw a"}' '{"prompt":"Sam lost a"}' > p.jsonl
lm-sample -c ck/latest -t byte.tok --jsonl -i p.jsonl -n 4 --max-tokens 6 --seed 1 \
	> ro.jsonl 2>/dev/null
ok $? "rollouts"

# edit.pl IN 'perl code over $o (the object) and $. (the line)' > OUT
cat > edit.pl <<'EOF2'
use strict; use warnings; use JSON::PP;
my ($in, $code) = @ARGV;
open my $f, '<', $in or die "$in: $!";
while (<$f>) { our $o = decode_json($_); $o->{reward} //= 0; eval $code; die $@ if $@;
	print JSON::PP->new->utf8->canonical->encode($o), "\n"; }
EOF2

nothing_written() { [ ! -e "$1/latest" ] && [ -z "$(ls "$1" 2>/dev/null)" ]; }

for r in 1e308 -1e308; do
	perl edit.pl ro.jsonl '$o->{reward} = $. == 3 ? '$r' : ($. % 2)' > big.jsonl
	for loss in grpo_clip reinforce_with_baseline no_baseline; do
		run rl-update -c ck/latest -o out-$loss -l $loss -j 1 big.jsonl
		is "$rc" 1 "reward $r, $loss: exit 1"
		case $err in
		"rl-update: big.jsonl:3: reward "*|"rl-update: step 1: "*" is not finite"*)
			ok 0 "named: $err" ;;
		*) ok 1 "named: $err" ;;
		esac
		nothing_written out-$loss; ok $? "nothing written"
		[ -z "$out" ]; ok $? "no metrics line"
		rm -rf out-$loss
	done
	run rl-update -c ck/latest -o out-ppo -a ppo -j 1 big.jsonl
	is "$rc" 1 "reward $r, ppo: exit 1 ($err)"
	nothing_written out-ppo; ok $? "ppo: nothing written"
	rm -rf out-ppo
done

# 3e38 fits a float, but no_baseline's loss (-reward x log-prob summed) does not
perl edit.pl ro.jsonl '$o->{reward} = $. == 3 ? 3e38 : 0' > huge.jsonl
run rl-update -c ck/latest -o out-huge -l no_baseline -j 1 huge.jsonl
is "$rc" 1 "reward 3e38, no_baseline: exit 1"
is "$err" "rl-update: step 1: the loss is not finite (inf); stopped, nothing written" \
	"the step named"
nothing_written out-huge; ok $? "nothing written"

perl edit.pl ro.jsonl '$o->{reward} = $. % 2; $o->{logprobs}[1] = -1e308 if $. == 2' > lp.jsonl
for algo in grpo ppo; do
	run rl-update -c ck/latest -o out-lp -a $algo -j 1 lp.jsonl
	is "$rc" 1 "log-prob -1e308, $algo: exit 1"
	is "$err" "rl-update: lp.jsonl:2: logprobs[1] is not a log-probability" \
		"$algo: the record and the token named"
	nothing_written out-lp; ok $? "$algo: nothing written"
	rm -rf out-lp
done

# the ordinary case still works
perl edit.pl ro.jsonl '$o->{reward} = $. % 2' > fine.jsonl
run rl-update -c ck/latest -o out-fine -j 1 fine.jsonl
is "$rc" 0 "finite rewards: exit 0 ($err)"
case $out in *'"loss":'*'"grad_norm":'*) ok 0 "loss and grad_norm reported" ;;
*) ok 1 "loss and grad_norm reported: $out" ;; esac
done_testing
