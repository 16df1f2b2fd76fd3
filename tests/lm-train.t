#!/bin/sh
# tests/lm-train.t: lm-train end to end on a generated text (byte-level
# tokens, tests/mktext.pl): a tiny model learns (validation loss far below
# the unigram entropy of the bytes), --resume from a mid-run checkpoint
# reproduces the uninterrupted run bit for bit (metrics and final
# checkpoint), and bad input fails clearly: wrong shapes, a checkpoint of
# another shape, a corrupt checkpoint, missing shards, a NaN loss.
# One thread (-j 1): exact and quick even on a loaded machine.
. "$(dirname "$0")/lib.sh"

cd "$TMP"
STEPS=150 EVERY=50 LINES=3000
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then STEPS=60 EVERY=20 LINES=1200; fi
HALF=$((STEPS / EVERY / 2 * EVERY))

byte_shards $LINES

train() { # train DIR LOG [OPTION]...
	dir=$1 log=$2; shift 2
	lm-train -m tiny --vocab 256 --context 64 -b 16 -n $STEPS --lr 1e-2 --warmup 10 \
		-d d --val d-val --eval-every $EVERY -o "$dir" --ckpt-every $EVERY --log "$log" -j 1 "$@"
}
run train ck full.jsonl
is "$rc" 0 "training runs ($err)"
H=$(perl -e 'local $/; my $t = <STDIN>; my %c; $c{$_}++ for split //, $t; my $n = length $t;
	my $h = 0; $h -= $_ / $n * log($_ / $n) for values %c; printf "%.4f", $h' < text.txt)
VAL=$(sed -n 's/.*"val_loss":\([0-9.e+-]*\).*/\1/p' full.jsonl | tail -1)
FIRST=$(sed -n 's/.*"step":1,"loss":\([0-9.e+-]*\).*/\1/p' full.jsonl)
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then LIMIT=0.6; else LIMIT=0.35; fi
perl -e "exit !($VAL < $LIMIT * $H)"
ok $? "final validation loss $VAL < $LIMIT x unigram entropy $H nats (first loss $FIRST)"
is "$(readlink ck/latest)" "step-$(printf %08d $STEPS).safetensors" "latest names the last checkpoint"
# each step's own time: on the CPU no step is queued ahead of the step
# before it (which gave a step the next one's time, and the step before a
# checkpoint almost none: billions of tokens/s)
perl -ne '$t{$1} = $2 if /"step":(\d+),.*"tokens_per_s":([0-9.]+)/;
	END { my @v = sort { $a <=> $b } map { $t{$_} } grep { $_ > 1 } keys %t;
		my $m = $v[@v / 2]; exit !(@v && $v[-1] < 20 * $m && $v[0] > $m / 20) }' full.jsonl
ok $? "each step's tokens/s within 20x of the median step's"

mkdir r
cp ck/step-$(printf %08d $HALF).safetensors r/
ln -s step-$(printf %08d $HALF).safetensors r/latest
run train r resumed.jsonl --resume
is "$rc" 0 "resume from step $HALF ($err)"
strip() { grep -v '"device"' "$@" | sed 's/,"tokens_per_s[^}]*//'; }
strip full.jsonl | sed -n "/\"step\":$((HALF + 1)),/,\$p" > want.txt
strip resumed.jsonl > got.txt
cmp -s want.txt got.txt
ok $? "resumed metrics equal the uninterrupted run's bit for bit ($(wc -l < got.txt) lines)"
cmp -s ck/step-$(printf %08d $STEPS).safetensors r/step-$(printf %08d $STEPS).safetensors
ok $? "resumed final checkpoint is byte-identical"

# Gradient accumulation: 2 micro-batches of 8 see the same windows as one
# batch of 16, so the losses agree up to the order of float sums.
acc() { lm-train -m tiny --vocab 256 --context 64 -n 3 --lr 1e-2 -d d -j 1 --log - "$@" |
	sed -n 's/.*"loss":\([0-9.e+-]*\).*/\1/p' | tr '\n' ' '; }
A=$(acc -b 16) B=$(acc -b 8 --accum 2)
perl -e '@a = split " ", $ARGV[0]; @b = split " ", $ARGV[1]; exit 1 unless @a == 3 && @b == 3;
	for (0 .. 2) { exit 1 if abs($a[$_] - $b[$_]) > 1e-4 } exit 0' "$A" "$B"
ok $? "--accum 2 x 8 follows -b 16 (losses $A / $B)"

run train bad.d bad.jsonl --resume
is "$rc" 1 "resume without a checkpoint fails"
mkdir other && cp r/step-$(printf %08d $HALF).safetensors other/ && ln -s step-$(printf %08d $HALF).safetensors other/latest
run train other o.jsonl --d-ff 96 --resume
is "$rc" 1 "checkpoint of another shape: exit 1"
case $err in *"differs from the one requested"*) ok 0 "message: $err" ;; *) ok 1 "message: $err" ;; esac
mkdir trunc && head -c 5000 r/latest > trunc/step-1.safetensors && ln -s step-1.safetensors trunc/latest
run train trunc t.jsonl --resume
is "$rc" 1 "truncated checkpoint: exit 1"
case $err in *"outside the file"*) ok 0 "message: $err" ;; *) ok 1 "message: $err" ;; esac

# NaN weights (the whole embedding): the first resumed step stops with the
# step's number and the last good checkpoint; nothing new is written.
# The checkpoint is rewritten without its checksums first (as lmpipe wrote
# before them), or the load would stop at the embedding's CRC-32C instead.
mkdir nan && ln -s ck.safetensors nan/latest
perl -MJSON::PP -e 'open my $f, "<:raw", $ARGV[0] or die; local $/; my $a = <$f>;
	my $n = unpack "Q<", $a; my $h = decode_json(substr $a, 8, $n);
	delete $h->{__metadata__}{$_} for grep { /^lmpipe\.crc32c\./ } keys %{$h->{__metadata__}};
	my $j = JSON::PP->new->canonical->encode($h); $j .= " " x ((8 - length($j) % 8) % 8);
	open my $o, ">:raw", $ARGV[1] or die; print $o pack("Q<", length $j), $j, substr $a, 8 + $n;' \
	r/step-$(printf %08d $HALF).safetensors nan/ck.safetensors
perl -e 'open my $f, "+<", $ARGV[0] or die; binmode $f; read $f, my $l, 8;
	my $h = unpack "Q<", $l; seek $f, 8 + $h, 0; print $f pack("V", 0x7fc00000) x (256 * 32);' nan/ck.safetensors
run train nan n.jsonl --resume
is "$rc" 1 "NaN loss: exit 1"
is "$err" "lm-train: step $((HALF + 1)): loss is nan; stopped, last good checkpoint nan/latest" "NaN message names the step"
is "$(ls nan | tr '\n' ' ')" "ck.safetensors latest " "no checkpoint written after the NaN"

run lm-train -m tiny --heads 5 -d d -n 1
is "$rc" 2 "d_model not divisible by heads: exit 2"
is "$err" "lm-train: d_model 32 is not divisible by the number of heads 5" "its message"
run lm-train -m tiny --heads 8 --d-model 24 -d d -n 1
is "$err" "lm-train: head dimension 3 (d_model / heads) is odd; RoPE needs it even" "odd head dimension"
run lm-train -m tiny --vocab 256 -d nothere -n 1
is "$rc" 1 "missing shards: exit 1"
ok $([ -n "$err" ] && echo 0 || echo 1) "message: $err"
run lm-train -m tiny --vocab 100 -d d -n 1
is "$rc" 1 "shards with a larger vocabulary than the model: exit 1 ($err)"
run lm-train -m tiny --vocab 256 --context 64 -d d -n 1 --device cuda
is "$rc" 1 "--device cuda: exit 1 ($err)"
done_testing
