#!/bin/sh
# tests/rl-update.t: the RL loop end to end on a tiny byte-level model that
# lm-train learns here in seconds: lm-sample rollouts -> rl-reward (an
# external scorer) -> rl-update, the reward going up over a few rounds; SFT
# raising the likelihood of its responses; equal rewards changing nothing;
# DPO against a reference; PPO with its value head; skimmed rollouts as
# jansson reads them; bad input with clear messages; an option of other
# algorithms only refused.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
STEPS=100 LINES=1500 ROUNDS=6 PPO_ROUNDS=4
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then LINES=600; fi

perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
perl "$LMPIPE_ROOT/tests/mktext.pl" $LINES 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
if ! shard-pack -o d < text.tok 2>shard.err; then
	# c-shard's shard_pack.c calls qsort(NULL, 0, ...) (flush_held), which
	# UBSan stops on: not this file's subject
	echo "1..0 # SKIP shard-pack failed: $(head -1 shard.err)"; exit 0
fi
lm-train -m tiny --vocab 256 --context 64 -b 16 -n $STEPS --lr 1e-2 --warmup 10 -d d -o ck \
	--ckpt-every $STEPS -j 1 2>/dev/null
ok $? "a tiny byte-level model to start from" || { done_testing; exit 1; }
run() { # as lib.sh's, without leaving set -e on
	"$@" >"$TMP/.out" 2>"$TMP/.err"
	rc=$?
	out=$(cat "$TMP/.out"); err=$(cat "$TMP/.err")
}
field() { printf '%s\n' "$1" | perl -ne "print \$1 if /\"$2\":(-?[0-9.e+-]+)/"; }

# GRPO: reward 1 when the completion starts with " s" (about 1 in 8 at first)
printf '%s\n' '{"prompt":"Max saw a"}' '{"prompt":"Sam lost a"}' '{"prompt":"Tom wanted a"}' \
	'{"prompt":"Kim carried a"}' > p.jsonl
cp -r ck pol
first="" last=""
i=1
while [ $i -le $ROUNDS ]; do
	rc=1 err="sampling or scoring failed"
	lm-sample -c pol/latest -t byte.tok --jsonl -i p.jsonl -n 8 --max-tokens 8 --seed $i \
		> ro.jsonl 2>/dev/null &&
	rl-reward -c 'perl -ne "print /\"completion\":\" s/ ? 1 : 0, qq(\n)"' ro.jsonl > sc.jsonl &&
	run rl-update -c pol/latest -o pol --lr 5e-3 -j 1 sc.jsonl
	[ "$rc" = 0 ] || { ok 1 "round $i: $err"; break; }
	r=$(field "$out" reward_mean)
	[ -z "$first" ] && first=$r
	last=$r
	echo "# round $i: $out"
	i=$((i + 1))
done
perl -e "exit !($last > $first + 0.25)"
ok $? "GRPO raises the reward over $ROUNDS rounds ($first -> $last)"
[ -L pol/latest ] && [ -f "pol/$(readlink pol/latest)" ]
ok $? "pol/latest points at the newest checkpoint"

# on-policy, the rollouts' log-probs are the policy's: ratio 1, and grpo_clip
# takes the same step as reinforce_with_baseline
lm-sample -c ck/latest -t byte.tok --jsonl -i p.jsonl -n 8 --max-tokens 8 --seed 1 > r0.jsonl 2>/dev/null
rl-reward -c 'perl -ne "print /\"completion\":\" s/ ? 1 : 0, qq(\n)"' r0.jsonl > s0.jsonl
run rl-update -c ck/latest -o c1 -j 1 s0.jsonl
clip_out=$out
printf '%s\n' "$err" | perl -ne 'exit !(/^rl-update: ([0-9.]+) s: read ([0-9.]+), reference ([0-9.]+), forward\/backward ([0-9.]+), optimizer ([0-9.]+), write ([0-9.]+)$/ && $4 > 0 && $2 + $3 + $4 + $5 + $6 <= $1 + 0.005)'
ok $? "the time split on stderr, its parts within the total ($err)"
perl -e "exit !(abs($(field "$out" ratio_mean) - 1) < 1e-4 && $(field "$out" clip_frac) == 0)"
ok $? "on-policy: mean ratio 1, nothing clipped ($(field "$out" ratio_mean))"
run rl-update -c ck/latest -o c2 -j 1 -l reinforce_with_baseline s0.jsonl
perl -e "exit !(abs($(field "$out" grad_norm) - $(field "$clip_out" grad_norm)) < 1e-3 * $(field "$out" grad_norm))"
ok $? "on-policy grpo_clip = reinforce_with_baseline (grad norm $(field "$clip_out" grad_norm) vs $(field "$out" grad_norm))"
run rl-update -c ck/latest -o c3 -j 1 -e 4 --lr 1e-2 --cliprange 0.05 s0.jsonl
perl -e "exit !($(field "$out" clip_frac) > 0)"
ok $? "off-policy epochs clip some tokens (clip_frac $(field "$out" clip_frac))"
run rl-update -c ck/latest -o c4 -j 1 --kl 0.5 --ref ck/latest s0.jsonl
perl -e "exit !($(field "$out" kl) == 0)"
ok $? "KL to the reference is 0 before the policy moves ($err)"
run rl-update -c c3/latest -o c5 -j 1 --kl 0.5 --ref ck/latest --lr 1e-9 s0.jsonl
perl -e "exit !($(field "$out" kl) > 0)"
ok $? "KL of a moved policy is positive ($(field "$out" kl))"

# rewards all equal: zero advantages, zero gradient, the same weights
perl -pe 's/"reward":[-0-9.e+]+/"reward":1/' sc.jsonl > same.jsonl
run rl-update -c ck/latest -o same -j 1 same.jsonl
perl -e "exit !($(field "$out" grad_norm) == 0)"
ok $? "equal rewards: gradient norm 0"
run rl-update -c ck/latest -o same2 -j 1 --no-std same.jsonl
perl -e "exit !($(field "$out" adv_max) == 0)"
ok $? "Dr. GRPO advantages of equal rewards are 0"

# rollouts skimmed (ids, log-probs, reward and group read from the text)
# and rollouts parsed by jansson (lines the skimmer declines, here for an
# escaped surrogate pair) make the same sequences: the same checkpoints
# (repeated keys: the last counts; a log-prob written as an integer)
perl -pe 's/"logprobs":\[[-0-9.e+]+/"logprobs":[-1/; s/^\{/{"logprobs":[0],"reward":"no",/; s/\}$/,"note":"x"}/' \
	s0.jsonl > fast.jsonl
perl -pe 's/"note":"x"/"note":"\\ud83d\\ude00"/' fast.jsonl > slow.jsonl
for a in grpo ppo; do
	run rl-update -a $a -c ck/latest -o fast-$a -j 1 --lr 1e-2 fast.jsonl
	f_rc=$rc
	run rl-update -a $a -c ck/latest -o slow-$a -j 1 --lr 1e-2 slow.jsonl
	[ "$f_rc$rc" = 00 ] && cmp -s fast-$a/latest slow-$a/latest
	ok $? "$a: skimmed and jansson-parsed rollouts give the same checkpoint ($err)"
done

# SFT: a second pass over the same records is more likely than the first
printf '%s\n' '{"prompt":"Max saw a","response":" big kite."}' '{"prompt":"Tom lost a","response":" red boat."}' > sft.jsonl
run rl-update -a sft -t byte.tok -c ck/latest -o sft --lr 5e-3 -e 3 -b 1 -j 1 sft.jsonl
is "$rc" 0 "SFT runs ($err)"
a=$(field "$out" logp_mean)
run rl-update -a sft -t byte.tok -c sft/latest -o sft -e 1 --lr 1e-9 -j 1 sft.jsonl
b=$(field "$out" logp_mean)
run rl-update -a sft -t byte.tok -c ck/latest -o sft0 -e 1 --lr 1e-9 -j 1 sft.jsonl
b0=$(field "$out" logp_mean)
perl -e "exit !($b > $b0 + 0.1)"
ok $? "SFT raises the log-likelihood of the responses ($b0 -> $b per token)"

# DPO: the reference against itself gives log 2; training makes the chosen win
printf '%s\n' '{"prompt":"Max saw a","chosen":" big kite.","rejected":" red boat."}' \
	'{"prompt":"Tom lost a","chosen":" big cake.","rejected":" old box."}' > dpo.jsonl
run rl-update -a dpo -t byte.tok -c ck/latest --ref ck/latest -o dpo0 --lr 1e-9 --beta 0.5 -j 1 dpo.jsonl
perl -e "exit !(abs($(field "$out" loss) - log(2)) < 1e-5)"
ok $? "DPO of the reference against itself: loss log 2 ($err$(field "$out" loss))"
run rl-update -a dpo -t byte.tok -c ck/latest --ref ck/latest -o dpo --lr 5e-3 --beta 0.5 -e 3 -j 1 dpo.jsonl
run rl-update -a dpo -t byte.tok -c dpo/latest --ref ck/latest -o dpo --lr 1e-9 --beta 0.5 -j 1 dpo.jsonl
perl -e "exit !($(field "$out" loss) < 0.3 && $(field "$out" accuracy) == 1)"
ok $? "DPO training: the chosen responses win (loss $(field "$out" loss))"
lm-train -m tiny --vocab 256 --context 64 --layers 1 -b 4 -n 1 -d d -o other -j 1 2>/dev/null
run rl-update -a dpo -t byte.tok -c ck/latest --ref other/latest -o x dpo.jsonl
is "$rc" 1 "a reference of another shape: exit 1"
case "$err" in "rl-update: reference checkpoint: other/latest: the checkpoint's model"*"differs"*) ok 0 "... and why";; *) ok 1 "... and why: $err";; esac
run rl-update -a dpo -t byte.tok -c ck/latest -o x dpo.jsonl
is "$rc" 2 "DPO without --ref: exit 2"

# bad input
run rl-update -c ck/latest -o x ro.jsonl
is "$rc" 1 "rollouts without rewards: exit 1"
is "$err" "rl-update: ro.jsonl:1: no numeric 'reward' (score the rollouts with rl-reward)" "... and why"
head -1 sc.jsonl > one.jsonl
run rl-update -c ck/latest -o x one.jsonl
is "$rc" 1 "a group of one: exit 1"
case "$err" in *"group 0 (line 1): groups of size 1: the standard deviation is undefined"*) ok 0 "... and why";; *) ok 1 "... and why: $err";; esac
run rl-update -c ck/latest -o x --no-std one.jsonl
is "$rc" 0 "a group of one is fine without the std"
perl -pe 's/,"logprobs":\[[^]]*\]//' sc.jsonl > nolp.jsonl
run rl-update -c ck/latest -o x nolp.jsonl
is "$err" "rl-update: nolp.jsonl:1: no 'logprobs' (grpo_clip needs the log-probs the rollouts were sampled with)" "grpo_clip without log-probs"
run rl-update -c ck/latest -o x -l reinforce_with_baseline nolp.jsonl
is "$rc" 0 "reinforce_with_baseline does not need them"
run rl-update -c ck/latest -o x --kl 0.1 sc.jsonl
is "$rc" 2 "--kl without --ref: exit 2"
printf '{"prompt":"x","reward":1,"group":0}\n' > noids.jsonl
run rl-update -c ck/latest -o x noids.jsonl
is "$err" "rl-update: noids.jsonl:1: no array 'prompt_ids' (rollouts come from lm-sample --jsonl)" "rollouts without token ids"
printf '{"prompt_ids":[1],"completion_ids":[999],"reward":1,"group":0}\n' > badid.jsonl
run rl-update -c ck/latest -o x badid.jsonl
is "$err" "rl-update: badid.jsonl:1: 'completion_ids'[0] is not a token id below 256" "a token outside the vocabulary"
perl -e 'print "{\"prompt_ids\":[1],\"completion_ids\":[", join(",", (1) x 80), "],\"reward\":1,\"group\":0}\n"' > long.jsonl
run rl-update -c ck/latest -o x long.jsonl
is "$err" "rl-update: long.jsonl:1: 81 tokens do not fit the model's context of 64" "a sequence longer than the context"
printf '{"prompt_ids":[1]}\nnot json\n' > badjson.jsonl
run rl-update -c ck/latest -o x badjson.jsonl
case "$err" in "rl-update: badjson.jsonl:1: no array 'completion_ids'"*) ok 0 "the first bad line is reported";; *) ok 1 "first bad line: $err";; esac
# a NUL byte ends no line well: the old reader took a trailing one for white
# space and trained on the line
printf '{"prompt_ids":[1],"completion_ids":[2],"reward":0,"group":0}\n{"prompt_ids":[1],"completion_ids":[3],"reward":1,"group":0}\000\n' > nul.jsonl
run rl-update -c ck/latest -o x -l reinforce_with_baseline nul.jsonl
is "$rc" 1 "a NUL byte in a rollout line: exit 1"
is "$err" "rl-update: nul.jsonl:2: a NUL byte at column 61 (the input must be text)" "... naming the file, line and column"
run rl-update -a sft -c ck/latest -o x sft.jsonl
is "$rc" 2 "SFT without a tokenizer: exit 2"
run rl-update -o x sc.jsonl
is "$rc" 2 "no checkpoint: exit 2"
run rl-update -c nonexistent -o x sc.jsonl
is "$rc" 1 "a checkpoint that does not exist: exit 1"

# PPO: on-policy first epoch, a new value head, then learning over rounds
run rl-update -a ppo -c ck/latest -o q1 -j 1 --lr 1e-3 s0.jsonl
perl -e "exit !(abs($(field "$out" ratio_mean) - 1) < 1e-4 && $(field "$out" clip_frac) == 0)"
ok $? "PPO on-policy: mean ratio 1, nothing clipped ($err$(field "$out" ratio_mean))"
case "$out" in *'"value_mean":0.0,'*'"value_head":"new"'*) ok 0 "a checkpoint without a value head starts one at 0";; *) ok 1 "new value head: $out";; esac
run rl-update -a ppo -c q1/latest -o q2 -j 1 --lr 1e-9 s0.jsonl
case "$out" in *'"value_head":"loaded"'*) ok 0 "the value head comes back from the checkpoint";; *) ok 1 "value head loaded: $out";; esac
perl -e "exit !($(field "$out" value_mean) != 0)"
ok $? "... trained: values no longer 0 ($(field "$out" value_mean))"
run rl-update -a ppo -c ck/latest -o q3 -j 1 --kl 0.1 --ref ck/latest --ent-coef 0.01 --vf-coef 0.5 s0.jsonl
perl -e "exit !($rc == 0 && abs($(field "$out" kl)) < 1e-4)"
ok $? "PPO with the KL penalty to the same model: KL 0 ($err$(field "$out" kl))"
cp -r ck ppo
first="" last="" i=1
while [ $i -le $PPO_ROUNDS ]; do
	rc=1 err="sampling or scoring failed"
	lm-sample -c ppo/latest -t byte.tok --jsonl -i p.jsonl -n 8 --max-tokens 8 --seed $i \
		> pro.jsonl 2>/dev/null &&
	rl-reward -c 'perl -ne "print /\"completion\":\" s/ ? 1 : 0, qq(\n)"' pro.jsonl > psc.jsonl &&
	run rl-update -a ppo -c ppo/latest -o ppo --lr 5e-3 -e 2 -b 16 --whiten -j 1 psc.jsonl
	[ "$rc" = 0 ] || { ok 1 "PPO round $i: $err"; break; }
	r=$(field "$out" reward_mean)
	[ -z "$first" ] && first=$r
	last=$r
	echo "# PPO round $i: $out"
	i=$((i + 1))
done
perl -e "exit !($last > $first + 0.25)"
ok $? "PPO raises the reward over $PPO_ROUNDS rounds ($first -> $last)"
run rl-update -a ppo -c ck/latest -o x nolp.jsonl
is "$rc" 1 "PPO on rollouts without log-probs: exit 1"
is "$err" "rl-update: nolp.jsonl:1: no 'logprobs' (ppo needs the log-probs the rollouts were sampled with)" "... and why"
run rl-update -a ppo -c ck/latest --kl 0.1 --ref other/latest -o x s0.jsonl
is "$rc" 1 "PPO with a reference of another shape: exit 1"
case "$err" in "rl-update: reference checkpoint: other/latest: the checkpoint's model"*"differs"*) ok 0 "... and why";; *) ok 1 "... and why: $err";; esac
run rl-update -a ppo -c ck/latest --kl 0.1 -o x s0.jsonl
is "$rc" 2 "PPO --kl without --ref: exit 2"

# an option of other algorithms only would do nothing: a usage error
bad() { # bad WANT OPTION...
	local want=$1; shift
	run rl-update -c ck/latest -o unused "$@" s0.jsonl
	is "$rc:$err" "2:rl-update: $want" "$*: refused"
}
bad "--gamma is for --algo ppo, not --algo grpo" --gamma 0.9
bad "--kl is for --algo grpo and ppo, not --algo sft" -a sft --kl 0.1
bad "--beta is for --algo dpo, not --algo ppo" -a ppo --beta 0.2
bad "--no-std is for --algo grpo, not --algo ppo" -a ppo --no-std
bad "--cliprange is for the grpo_clip loss and --algo ppo, not the reinforce_with_baseline loss" \
	-l reinforce_with_baseline --cliprange 0.1
bad "--constant is the divisor of --agg normalize" --constant 64
bad "--ref is the reference model of --algo dpo and of --kl, which this run does not use" --ref ck/latest
[ ! -e unused ]; ok $? "... and nothing written"
done_testing
