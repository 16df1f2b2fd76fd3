#!/bin/sh
# tests/gpu/lm-train-stop-cuda.t: how lm-train --device cuda stops on bad
# numbers and too little memory.  A NaN loss (a checkpoint whose embedding
# is NaN, as tests/lm-train.t provokes it on the CPU, resumed on CUDA)
# stops at the first step, naming it and the last good checkpoint, which is
# kept, and nothing is written after it; the same for infinite weights.
# Out of GPU memory: exit 1 with the size asked for and the hint.  Needs a
# GPU.
. "$(dirname "$0")/../lib.sh"

need_gpu
cd "$TMP"
LINES=2000
byte_shards $LINES
C=128
train() { # train DIR LOG STEPS [OPTION]...
	dir=$1 log=$2 n=$3; shift 3
	lm-train --device cuda --vocab 256 --context 64 --d-model $C --layers 2 --heads 4 \
		--d-ff 352 -b 16 -n "$n" --lr 3e-3 --warmup 5 -d d -o "$dir" --ckpt-every 10 \
		--log "$log" "$@"
}
run train ck ck.jsonl 20
is "$rc" 0 "20 steps on CUDA, a checkpoint every 10 ($err)"

# poison DIR VALUE: DIR/ck.safetensors, ck/step-10 without its checksums
# (or the load would stop at the embedding's CRC-32C) and with every value
# of the embedding (the first tensor, 256 x C) set to the u32 VALUE.
poison() {
	mkdir "$1" && ln -s ck.safetensors "$1/latest"
	perl -MJSON::PP -e 'open my $f, "<:raw", $ARGV[0] or die; local $/; my $a = <$f>;
		my $n = unpack "Q<", $a; my $h = decode_json(substr $a, 8, $n);
		delete $h->{__metadata__}{$_} for grep { /^lmpipe\.crc32c\./ } keys %{$h->{__metadata__}};
		my $j = JSON::PP->new->canonical->encode($h); $j .= " " x ((8 - length($j) % 8) % 8);
		open my $o, ">:raw", $ARGV[1] or die; print $o pack("Q<", length $j), $j, substr $a, 8 + $n;' \
		ck/step-00000010.safetensors "$1/ck.safetensors"
	perl -e 'open my $f, "+<", $ARGV[0] or die; binmode $f; read $f, my $l, 8;
		my $h = unpack "Q<", $l; seek $f, 8 + $h, 0; print $f pack("V", hex $ARGV[1]) x (256 * $ARGV[2]);' \
		"$1/ck.safetensors" "$2" $C
}
for kind in nan:7fc00000 inf:7f800000; do
	name=${kind%%:*}
	poison "$name" "${kind#*:}"
	run train "$name" "$name.jsonl" 20 --resume
	is "$rc" 1 "$name weights on CUDA: exit 1"
	case $(printf "%s\n" "$err" | tail -n 1) in "lm-train: step 11: loss is "n[a]n"; stopped, last good checkpoint $name/latest" | \
		"lm-train: step 11: loss is inf; stopped, last good checkpoint $name/latest")
		ok 0 "$name: the message names the step and the last good checkpoint: $err" ;;
	*)	ok 1 "$name: the message names the step and the last good checkpoint: $err" ;; esac
	is "$(ls "$name" | tr '\n' ' ')" "ck.safetensors latest " "$name: the checkpoint kept, nothing written after it"
done

run train big big.jsonl 1 -b 1000000
is "$rc" 1 "a batch that does not fit the GPU: exit 1"
case $err in *"out of GPU memory: "[0-9]*" GiB asked for, "*" GiB free of "*"smaller batch"*"--accum"*)
	ok 0 "the size asked for and the hint: $err" ;;
*)	ok 1 "the size asked for and the hint: $err" ;; esac
[ ! -e big ] || [ -z "$(ls big)" ]
ok $? "no checkpoint directory left behind"
done_testing
