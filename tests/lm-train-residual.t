#!/bin/sh
# tests/lm-train-residual.t: lm-train --residual bf16 on the CPU (issue 16's
# bf16 residual stream): the CPU keeps the stream in fp32 rounded to bf16
# after each write, so the run differs from the fp32 stream's but not by
# much; the choice is recorded in the checkpoints and --resume keeps it
# (3 + resume + 3 steps equal 6 bit for bit); --residual-grad bf16 rounds
# the stream's gradient too, and needs the bf16 stream; a bad value is a
# usage error.
# Byte-level shards of a generated text, the tiny model, one thread.
. "$(dirname "$0")/lib.sh"

cd "$TMP"
byte_shards 400
M="-m tiny --vocab 256 --context 32 -b 4 -j 1 -d d"

run lm-train $M -n 6 --ckpt-every 3 -o bf --residual bf16 --log bf.jsonl
is "$rc" 0 "--residual bf16 trains ($err)"
run lm-train $M -n 6 --ckpt-every 3 -o f32 --log f32.jsonl
is "$rc" 0 "the default (f32) trains ($err)"
cmp -s bf/step-00000006.safetensors f32/step-00000006.safetensors
is "$?" 1 "the bf16 stream's run differs from the fp32 stream's"
near() { # near A.jsonl B.jsonl: the last logged losses within 2 % of each other
	perl -MJSON::PP -e 'sub last_loss { open my $f, "<", shift or die; my $l;
		$l = decode_json($_)->{loss} while <$f>; $l }
	my ($a, $b) = (last_loss($ARGV[0]), last_loss($ARGV[1]));
	print "$a $b\n"; exit(abs($a - $b) <= 0.02 * $b ? 0 : 1)' "$1" "$2"
}
msg=$(near bf.jsonl f32.jsonl); rc=$?
ok $rc "the losses at step 6 are close ($msg)"

run lm-train -c bf/latest --info
printf '%s\n' "$out" | grep -q '"residual":"bf16"'
ok $? "--info: the hyper-parameters record residual bf16"
run lm-train -c f32/latest --info
printf '%s\n' "$out" | grep -q '"residual":"f32"'
ok $? "--info: the default is recorded as f32"

# --resume without --residual continues in bf16 (the checkpoint's)
mkdir half
cp bf/step-00000003.safetensors half/
ln -s step-00000003.safetensors half/latest
run lm-train -d d -o half --resume -j 1
is "$rc" 0 "resumes from step 3 ($err)"
cmp -s bf/step-00000006.safetensors half/step-00000006.safetensors
ok $? "3 steps + resume + 3 equal 6 steps bit for bit (the stream stays bf16)"

# its gradient too: another run again, close; it needs the bf16 stream
run lm-train $M -n 6 -o bg --residual bf16 --residual-grad bf16 --log bg.jsonl
is "$rc" 0 "--residual-grad bf16 trains ($err)"
cmp -s bf/step-00000006.safetensors bg/step-00000006.safetensors
is "$?" 1 "the bf16 gradient's run differs from the bf16 stream's alone"
msg=$(near bg.jsonl f32.jsonl); rc=$?
ok $rc "its loss at step 6 is close to the fp32 run's ($msg)"
run lm-train -c bg/latest --info
printf '%s\n' "$out" | grep -q '"residual_grad":"bf16"'
ok $? "--info: the hyper-parameters record residual_grad bf16"
run lm-train $M -n 1 --residual-grad bf16
is "$rc" 2 "--residual-grad bf16 without --residual bf16: exit 2"
is "$err" "lm-train: --residual-grad bf16 needs --residual bf16 (the stream itself)" \
	"--residual-grad alone: the message"

run lm-train $M -n 1 --residual f16
is "$rc" 2 "--residual f16: exit 2"
case $err in *"--residual"*) ok 0 "the message names the option ($err)" ;;
	*) ok 1 "the message names the option ($err)" ;; esac
done_testing
