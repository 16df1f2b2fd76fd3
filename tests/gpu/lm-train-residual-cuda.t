#!/bin/sh
# tests/gpu/lm-train-residual-cuda.t: lm-train --residual bf16 on CUDA (the
# residual stream stored in bf16): 150 steps of a small model (d_model 256,
# so RMSNorm takes its 16-byte and bulk-copy paths) against the same run
# with the fp32 stream on CUDA and with the bf16-rounded stream on the CPU,
# and with the gradient in bf16 too (--residual-grad bf16) against fp32's:
# the validation losses' means within 1 %, each within 3 % (the runs part
# ways as any two runs do: measured on an H100, stop 72, evaluations 1.5 to
# 2.4 % apart either way, means 0.03 to 0.3 % apart); the run is
# graphed as usual and resumes on CUDA; the profile runs.  Needs a GPU.
. "$(dirname "$0")/../lib.sh"

need_gpu
cd "$TMP"
STEPS=150 EVERY=30
byte_shards 4000

train() { # train DEVICE DIR LOG [OPTION]...
	dev=$1 dir=$2 log=$3; shift 3
	lm-train --device "$dev" --vocab 256 --context 64 --d-model 256 --layers 2 --heads 4 \
		--d-ff 704 -b 16 -n $STEPS --lr 3e-3 --warmup 20 -d d --val d-val --eval-every $EVERY \
		-o "$dir" --ckpt-every 75 --log "$log" "$@"
}
run train cuda gb gb.jsonl --residual bf16
is "$rc" 0 "CUDA training with the bf16 stream runs ($err)"
run train cuda gf gf.jsonl
is "$rc" 0 "CUDA training with the fp32 stream runs ($err)"
run train cuda gg gg.jsonl --residual bf16 --residual-grad bf16
is "$rc" 0 "CUDA training with the bf16 stream and gradient runs ($err)"
run train cpu cb cb.jsonl --residual bf16
is "$rc" 0 "CPU training with the bf16-rounded stream runs ($err)"
vals() { sed -n 's/.*"step":\([0-9]*\),"val_loss":\([0-9.e+-]*\).*/\1 \2/p' "$1"; }
close() { # close A B LIMIT MEAN: each validation loss of log A within LIMIT of B's at
	# the same step, and their means within MEAN
	vals "$1" > a.txt
	vals "$2" > b.txt
	perl -e 'open A, $ARGV[0]; open B, $ARGV[1]; my %b = map { split " " } <B>;
		my ($n, $worst, $at, $sa, $sb, @r) = (0, 0, 0, 0, 0);
		while (<A>) { my ($s, $l) = split " "; next unless exists $b{$s};
			my $r = abs($l - $b{$s}) / $b{$s}; $n++; $sa += $l; $sb += $b{$s};
			push @r, sprintf "%d: %.4f/%.4f", $s, $l, $b{$s};
			($worst, $at) = ($r, $s) if $r > $worst; }
		my $m = $n ? abs($sa - $sb) / $sb : 1;
		printf "%d evaluations, worst %.4f at step %d, means %.4f apart; %s\n", $n, $worst, $at,
			$m, join ", ", @r;
		exit($n < 3 || $worst > $ARGV[2] || $m > $ARGV[3])' a.txt b.txt "$3" "$4"
}
msg=$(close gb.jsonl gf.jsonl 0.03 0.01); rc=$?
ok $rc "bf16 stream against fp32 stream on CUDA: validation loss within 3 %, its mean within 1 % ($msg)"
msg=$(close gb.jsonl cb.jsonl 0.03 0.01); rc=$?
ok $rc "bf16 stream on CUDA against the CPU's rounded one: validation loss within 3 %, its mean within 1 % ($msg)"
msg=$(close gg.jsonl gf.jsonl 0.03 0.01); rc=$?
ok $rc "bf16 stream and gradient against fp32 on CUDA: validation loss within 3 %, its mean within 1 % ($msg)"
cmp -s gb/step-00000150.safetensors gf/step-00000150.safetensors
is "$?" 1 "the two CUDA runs differ (the stream's type took effect)"

# resumed at step 75 (the checkpoint says bf16), it ends where the whole run did
mkdir half
cp gb/step-00000075.safetensors half/
ln -s step-00000075.safetensors half/latest
run lm-train --device cuda -d d --val d-val -o half --resume --log half.jsonl
is "$rc" 0 "resumes on CUDA from step 75 ($err)"
msg=$(close half.jsonl gb.jsonl 0.001 0.001); rc=$?
ok $rc "the resumed run's validation losses match the whole run's ($msg)"

run train cuda gp gp.jsonl --residual bf16 -n 4 --eval-every 0 --profile 2
is "$rc" 0 "--profile with the bf16 stream ($err)"
printf '%s\n' "$err" | grep -q "matmul o"
ok $? "the profile table lists the o product"
done_testing
