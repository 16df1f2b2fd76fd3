#!/bin/sh
# tests/lm-sample.t: lm-sample end to end with a tiny byte-level model that
# lm-train learns here in a few seconds: text and JSON Lines output, groups,
# seeds, batch = one-at-a-time, stop strings, the thinking budget, long
# prompts, and bad input (malformed JSON lines with their line numbers, an
# empty prompt, a tokenizer of another vocabulary, missing options).
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
STEPS=100 LINES=1500
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then STEPS=20 LINES=600; fi

# a byte-level tokenizer: 256 tokens, no merges (man 5 lmpipe-tokenizer)
perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
perl "$LMPIPE_ROOT/tests/mktext.pl" $LINES 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d < text.tok
lm-train -m tiny --vocab 256 --context 64 -b 16 -n $STEPS --lr 1e-2 --warmup 10 -d d -o ck \
	--ckpt-every $STEPS -j 1 2>/dev/null
ok $? "a tiny byte-level model to sample from" || { done_testing; exit 1; }
CK=ck/latest
run() { # as lib.sh's, without leaving set -e on: a failed check must not end the file
	"$@" >"$TMP/.out" 2>"$TMP/.err"
	rc=$?
	out=$(cat "$TMP/.out"); err=$(cat "$TMP/.err")
}
S() { lm-sample -c $CK -t byte.tok "$@"; }

# JSON checks: check.pl FILE 'perl expression over @o (the objects)'
cat > check.pl <<'EOF'
use strict; use warnings; use JSON::PP;
my ($file, $expr) = @ARGV;
open my $fh, '<', $file or die "$file: $!";
my @o = map { decode_json($_) } grep { /\S/ } <$fh>;
my $r = eval $expr; die $@ if $@;
exit($r ? 0 : 1);
EOF
J() { perl check.pl "$@"; }

run S --temperature 0 --max-tokens 12 "Max saw a" "Tom"
is "$rc" 0 "greedy from arguments ($err)"
[ -n "$out" ]; ok $? "text output"
first=$out
is "$(printf '%s\n' "$out" | grep '^=== ' | tr '\n' ' ')" "=== prompt 1, sample 1 === === prompt 2, sample 1 === " "plain text: a header line per sample"
printf '%s\n' "$out" | sed -n 2p | grep -q '^Max saw a'
ok $? "plain text: the prompt, then its completion"
run S --temperature 0 --max-tokens 4 -n 2 "Tom"
is "$(printf '%s\n' "$out" | grep '^=== ' | tr '\n' ' ')" "=== prompt 1, sample 1 === === prompt 1, sample 2 === " "plain text, -n 2: each sample numbered"
run S --temperature 0 --max-tokens 12 -b 1 "Max saw a" "Tom"
is "$out" "$first" "greedy: batch 1 gives the same text"

printf '%s\n' '{"prompt":"Max saw a","id":"a"}' '{"prompt":"Sam","id":"b","group":"mine"}' \
	'{"prompt":"Lily liked","id":"c"}' > p.jsonl
S --jsonl -i p.jsonl -n 3 --max-tokens 16 --seed 7 > r1.jsonl
ok $? "JSON Lines: 3 prompts, -n 3"
J r1.jsonl '@o == 9 && !grep { my $x = $_; grep { !exists $x->{$_} } qw(prompt id completion completion_ids logprobs prompt_ids group sample finish_reason) } @o'
ok $? "every object has the input and output fields"
J r1.jsonl 'join(",", map { "$_->{id}$_->{group}$_->{sample}" } @o) eq "a00,a01,a02,b10,b11,b12,c20,c21,c22"'
ok $? "in input order; group = prompt ordinal (replacing an input field), sample = index"
# (a byte >= 0x80 alone is not UTF-8: it would show as U+FFFD, see test_prompts)
J r1.jsonl '!grep { my @i = @{$_->{completion_ids}}; @i != @{$_->{logprobs}} || (!grep({ $_ > 127 } @i) && join("", map { chr } @i) ne $_->{completion}) || grep { $_ > 0 } @{$_->{logprobs}} } @o'
ok $? "completion = decoded completion_ids; one log-prob (<= 0) per token"
J r1.jsonl '!grep { $_->{finish_reason} ne "length" || @{$_->{completion_ids}} != 16 } @o'
ok $? "no end-of-text token in this tokenizer: all stop at --max-tokens (length)"

# --stats: the same output, and on stderr the counts of what it wrote
S --jsonl -i p.jsonl -n 3 --max-tokens 16 --seed 7 --stats > r1s.jsonl 2> stats.err
ok $? "--stats"
cmp -s r1.jsonl r1s.jsonl
ok $? "--stats: the same samples on stdout"
sed -n 's/^lm-sample: stats: //p' stats.err > stats.json
J r1s.jsonl 'open my $f, "<", "stats.json" or die; my $s = decode_json(<$f>); my $p = 0; $p += @{$_->{prompt_ids}} for grep { $_->{sample} == 0 } @o;
	$s->{prompts} == 3 && $s->{samples} == 9 && $s->{new_tokens} == 9 * 16 && $s->{prompt_tokens} == $p
	&& $s->{load_s} > 0 && $s->{generate_s} > 0 && abs($s->{new_tokens_per_s} - $s->{new_tokens} / $s->{generate_s}) < 0.1 * $s->{new_tokens_per_s} + 1'
ok $? "--stats: prompts, samples, prompt and new tokens, times ($(cat stats.err))"
# all 9 sequences admitted in the first turn (batch 16): it chooses their
# first tokens, then 15 decoding turns choose 9 tokens each
J r1s.jsonl 'open my $f, "<", "stats.json" or die; my $s = decode_json(<$f>);
	$s->{decode_turns} == 15 && $s->{decode_tokens} == 15 * 9 && $s->{prefill_s} > 0 && $s->{decode_s} > 0
	&& $s->{prefill_s} + $s->{decode_s} <= $s->{generate_s} && $s->{decode_max_s} <= $s->{decode_s}
	&& $s->{prefill_turns} == 1 && $s->{prefill_max_s} == $s->{prefill_s}
	&& $s->{decode_max_s} * 15 >= $s->{decode_s}'
ok $? "--stats: the prefill turn and the 15 decoding turns"
J r1s.jsonl 'open my $f, "<", "stats.json" or die; my $s = decode_json(<$f>); my $p = 0;
	$p += $s->{$_} for qw(input_s feed_s choose_s output_s);
	!grep({ !defined $s->{$_} || $s->{$_} < 0 } qw(input_s feed_s choose_s output_s))
	&& $s->{feed_s} > 0 && $s->{choose_s} > 0 && $p <= $s->{generate_s}'
ok $? "--stats: input, feed, choose and output times, within generate_s"
S --jsonl -i p.jsonl -n 3 --max-tokens 16 --seed 7 -b 3 > r2.jsonl
S --jsonl -i p.jsonl -n 3 --max-tokens 16 --seed 7 -b 64 > r3.jsonl
strip() { perl -MJSON::PP -ne 'my $o = decode_json($_); print join(" ", @{$o->{completion_ids}}), "\n"' "$@"; }
is "$(strip r2.jsonl)" "$(strip r1.jsonl)" "same seed, batch 3: same samples"
is "$(strip r3.jsonl)" "$(strip r1.jsonl)" "same seed, batch 64: same samples"
S --jsonl -i p.jsonl -n 3 --max-tokens 16 --seed 8 > r4.jsonl
[ "$(strip r4.jsonl)" != "$(strip r1.jsonl)" ]
ok $? "another seed: other samples"
perl -MJSON::PP -e 'my (@a, @b); for my $f (@ARGV) { open my $h, "<", $f or die; push @{$f eq $ARGV[0] ? \@a : \@b}, map { @{decode_json($_)->{logprobs}} } <$h> }
	my $w = 0; for (0 .. $#a) { my $d = abs($a[$_] - $b[$_]); $w = $d if $d > $w } exit($w <= 1e-5 ? 0 : 1)' r1.jsonl r3.jsonl
ok $? "batch 64 log-probs equal one-prompt-at-a-time's within 1e-5"
# 48 sequences on 8 threads: the products split rows as well as columns
# (model_decode_cpu.c's split2d); a row's result must not depend on it
perl -e 'printf "{\"prompt\":\"%s\"}\n", (qw(Max Sam Lily Tom Ann Bob))[$_ % 6] . " saw" x ($_ % 4) for 0 .. 11' > p12.jsonl
S --jsonl -i p12.jsonl -n 4 --max-tokens 8 --seed 5 -b 64 -j 1 > j1.jsonl
S --jsonl -i p12.jsonl -n 4 --max-tokens 8 --seed 5 -b 64 -j 8 > j8.jsonl
cmp -s j1.jsonl j8.jsonl
ok $? "batch 48 on 8 threads: the same output, log-probs too, as on 1"

# teacher forcing: lm-train --dump-logits on prompt + completion (all of one
# length here) gives the log-probs lm-sample reported
printf '%s\n' '{"prompt":"Max saw"}' '{"prompt":"Sue had"}' '{"prompt":"Tom ran"}' > eq.jsonl
S --jsonl -i eq.jsonl -n 2 --max-tokens 16 --seed 3 --temperature 1.3 --top-p 0.9 > tf.jsonl
perl -MJSON::PP -ne 'my $o = decode_json($_); my @c = @{$o->{completion_ids}}; pop @c;
	print join(" ", @{$o->{prompt_ids}}, @c), "\n"' tf.jsonl > tf.ids
lm-train -c $CK --ids tf.ids --dump-logits tf.st
perl -MJSON::PP -e 'open my $f, "<", "tf.st" or die; binmode $f; my $d = do { local $/; <$f> };
	my $n = unpack "Q<", substr($d, 0, 8); my $h = decode_json(substr($d, 8, $n));
	my ($B, $T, $V) = @{$h->{logits}{shape}}; my $base = 8 + $n + $h->{logits}{data_offsets}[0];
	open my $j, "<", "tf.jsonl" or die; my ($w, $b) = (0, 0);
	while (<$j>) { my $o = decode_json($_); my $P = @{$o->{prompt_ids}};
		for my $t (0 .. $#{$o->{completion_ids}}) {
			my @r = unpack "f<*", substr($d, $base + 4 * (($b * $T + $P - 1 + $t) * $V), 4 * $V);
			my $mx = $r[0]; for (@r) { $mx = $_ if $_ > $mx } my $s = 0; $s += exp($_ - $mx) for @r;
			my $lp = $r[$o->{completion_ids}[$t]] - $mx - log($s);
			my $dd = abs($lp - $o->{logprobs}[$t]); $w = $dd if $dd > $w } $b++ }
	print "# max |logprob - teacher-forced| = $w over $b samples\n"; exit($b == 6 && $w <= 1e-4 ? 0 : 1)'
ok $? "reported log-probs equal lm-train's teacher-forced logits within 1e-4 (top-p 0.9, temperature 1.3)"

S --jsonl -i p.jsonl --top-k 5 --top-p 0.8 --temperature 0.7 --stop ' at' --max-tokens 40 > st.jsonl
J st.jsonl '!grep { $_->{finish_reason} eq "stop" ? substr($_->{completion}, -3) ne " at" : index($_->{completion}, " at") >= 0 } @o'
ok $? "--stop: a completion ends with the stop string, or never contains it"

S --jsonl --temperature 0 --think-budget 3 --think-close '</think>X' --max-tokens 20 'Max <think>' > th.jsonl
J th.jsonl '$o[0]{completion} =~ /^...<\/think>X/s && join(",", @{$o[0]{forced}}) eq "3,4,5,6,7,8,9,10,11"'
ok $? "--think-budget 3: the closing text after 3 tokens, flagged forced"

long=$(printf 'Max saw a big kite at school. %.0s' 1 2 3)
run S --context 32 --max-tokens 4 "$long"
is "$rc" 1 "a prompt longer than the context: exit 1"
is "$err" "lm-sample: argument 1: the prompt has 90 tokens, more than the context of 32 (--truncate keeps its end)" "its message"
S --jsonl --context 32 --max-tokens 4 --truncate "$long" > tr.jsonl
J tr.jsonl '@{$o[0]{prompt_ids}} == 28 && join(",", @{$o[0]{prompt_ids}}[-3..-1]) eq "108,46,32"'
ok $? "--truncate keeps the prompt's last context - max-tokens tokens"

printf '%s\n' '{"prompt":"Max"}' '{"prompt": "x"' '{"id": 3}' '{"prompt":""}' '{"prompt":"Tom"}' > bad.jsonl
run S --jsonl -i bad.jsonl --max-tokens 2
is "$rc" 1 "malformed JSON line: exit 1"
is "$err" "lm-sample: bad.jsonl:2: malformed JSON at column 14: '}' expected near end of file" "the message names the line"
is "$(printf '%s\n' "$out" | wc -l | tr -d ' ')" 1 "prompts before the bad line are still answered"
run S --jsonl -i bad.jsonl --max-tokens 2 --on-error skip
is "$rc" 0 "--on-error skip goes on"
is "$err" "lm-sample: bad.jsonl:2: malformed JSON at column 14: '}' expected near end of file (skipped)
lm-sample: bad.jsonl:3: no \"prompt\" field (skipped)
lm-sample: bad.jsonl:4: empty prompt (skipped)" "each bad line is reported"
is "$(printf '%s\n' "$out" | wc -l | tr -d ' ')" 2 "the good lines are answered"
printf '{"prompt":"Max"}\n{"prompt":"x"}\000\n{"prompt":"Tom"}\n' > nul.jsonl
run S --jsonl -i nul.jsonl --max-tokens 2 --on-error skip
is "$err" "lm-sample: nul.jsonl:2: a NUL byte at column 15 (the input must be text) (skipped)" "a NUL byte in a JSON line: named, skipped"
is "$(printf '%s\n' "$out" | wc -l | tr -d ' ')" 2 "... and the lines around it answered"
run sh -c "printf 'Max\000\n' | lm-sample -c $CK -t byte.tok --max-tokens 2"
is "$err" "lm-sample: <stdin>:1: a NUL byte at column 4 (the input must be text)" "a NUL byte in a text prompt: named"
is "$rc" 1 "... exit 1"
run sh -c "printf 'Max\n\nTom\n' | lm-sample -c $CK -t byte.tok --max-tokens 2"
is "$err" "lm-sample: <stdin>:2: empty prompt" "an empty prompt line: clear message"
is "$rc" 1 "and exit 1"

run S --special '<|endoftext|>' "Max"
is "$rc" 1 "tokenizer larger than the model's vocabulary: exit 1"
is "$err" "lm-sample: the tokenizer has 257 tokens but the checkpoint $CK has a vocabulary of 256: they do not belong together" "its message"
run lm-sample -t byte.tok "Max"
is "$rc" 2 "no checkpoint: exit 2"
is "$err" "lm-sample: generation needs a checkpoint: -c CHECKPOINT (from lm-train)" "its message"
run lm-sample -c $CK "Max"
is "$rc" 2 "no tokenizer: exit 2"
run S --context 65 "Max"
is "$rc" 2 "--context beyond the model's: exit 2"
run S -n 4 -b 2 "Max"
is "$rc" 2 "-n larger than --batch: exit 2 ($err)"
run S --top-p 0 "Max"
is "$rc" 2 "--top-p 0: exit 2"
run S -c nothere.safetensors "Max"
is "$rc" 1 "a missing checkpoint: exit 1 ($err)"
done_testing
