#!/bin/sh
# tests/lm-train-profile.t: lm-train --profile N on the CPU: a table of
# every op over the N steps after the first (calls, time, share, rates),
# whose shares add up to the whole, with the wall time of a step above it;
# the profiled steps train as the others do (the checkpoint equals an
# unprofiled run's, bit for bit); a profile longer than the run is cut to
# the steps there are.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
perl "$LMPIPE_ROOT/tests/mktext.pl" 300 1 | perl "$LMPIPE_ROOT/tests/bytes2tok.pl" > t.tok
shard-pack -o d < t.tok
T() { lm-train -m tiny --vocab 256 --context 32 -b 4 --lr 1e-2 --warmup 2 -d d -j 1 "$@"; }

T -n 5 -o plain 2> /dev/null
T -n 5 -o prof --profile 3 2> prof.err
ok $? "--profile 3: the run succeeds"
grep -q '^lm-train: profile of 3 steps: [0-9.]* ms a step, [0-9.]* ms of it in ops$' prof.err
ok $? "the header: steps profiled, wall time of a step, time in ops" || sed 's/^/# /' prof.err
head_line=$(grep -n '^op  *calls  *total ms  *share  *ms/call  *TFLOP/s  *GB/s$' prof.err | cut -d: -f1)
[ -n "$head_line" ]; ok $? "the column titles"
rows=$(sed -n "$((head_line + 1)),\$p" prof.err | grep -E '^[a-zA-Z+ _/]+ +[0-9]+ +[0-9.]+ +[0-9.]+% ')
for op in 'head+xent fwd+bwd' 'attention' 'attention backward' 'AdamW' 'rmsnorm backward' 'matmul qkv'; do
	printf '%s\n' "$rows" | grep -q "^$op  *[0-9]"; ok $? "a row for $op"
done
# rows: name (may hold blanks) then six numbers; the calls of a layer's op
# are steps x layers (tiny: 2 layers), the head's one a step
calls() { printf '%s\n' "$rows" | awk -v op="$1" '{ n = NF - 6; name = $1; for (i = 2; i <= n; i++) name = name " " $i;
	if (name == op) print $(n + 1) }'; }
is "$(calls 'head+xent fwd+bwd')" 3 "the head: one call a step"
is "$(calls 'matmul qkv')" 6 "qkv: one call a layer a step (2 layers x 3)"
share=$(printf '%s\n' "$rows" | awk '{ s += $(NF - 3) } END { printf "%.0f", s }')
[ "$share" -ge 99 ] && [ "$share" -le 101 ]; ok $? "the shares add up to 100 % ($share)"
is "$(cmp plain/step-00000005.safetensors prof/step-00000005.safetensors && echo same)" same \
	"the profiled steps train as the others: the same checkpoint"
T -n 3 --profile 10 2> long.err
ok $? "--profile longer than the run"
grep -q '^lm-train: profile of 2 steps' long.err; ok $? "... profiles the 2 steps after the first" || sed 's/^/# /' long.err
done_testing
