#!/bin/sh
# tests/lm-train-muon.t: lm-train --optimizer muon on the CPU: a tiny model
# learns (validation loss far below the unigram entropy of the bytes), the
# log names both groups, --resume from a mid-run checkpoint reproduces the
# uninterrupted run bit for bit (metrics and final checkpoint, with the
# momentum warm-up and the WSD schedule crossing the resume point), a run
# of Muon cannot be resumed as AdamW (exit 2), and --progress shows the
# groups.  One thread (-j 1): exact and quick.
. "$(dirname "$0")/lib.sh"

cd "$TMP"
STEPS=120 EVERY=40 LINES=3000
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then STEPS=40 EVERY=20 LINES=1200; fi
HALF=$((STEPS / EVERY / 2 * EVERY))

byte_shards $LINES

train() { # train DIR LOG [OPTION]...
	dir=$1 log=$2; shift 2
	lm-train -m tiny --vocab 256 --context 64 -b 16 -n $STEPS --lr 1e-2 --warmup 10 \
		--optimizer muon --muon-lr 0.02 --muon-momentum-start 0.85 --muon-momentum-warmup $STEPS \
		--muon-weight-decay 0.01 --schedule wsd --decay-frac 0.5 --decay-shape sqrt \
		-d d --val d-val --eval-every $EVERY -o "$dir" --ckpt-every $EVERY --log "$log" -j 1 "$@"
}
run train ck full.jsonl
is "$rc" 0 "Muon training runs ($err)"
H=$(perl -e 'local $/; my $t = <STDIN>; my %c; $c{$_}++ for split //, $t; my $n = length $t;
	my $h = 0; $h -= $_ / $n * log($_ / $n) for values %c; printf "%.4f", $h' < text.txt)
VAL=$(sed -n 's/.*"val_loss":\([0-9.e+-]*\).*/\1/p' full.jsonl | tail -1)
FIRST=$(sed -n 's/.*"step":1,"loss":\([0-9.e+-]*\).*/\1/p' full.jsonl)
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then LIMIT=0.7; else LIMIT=0.4; fi
perl -e "exit !($VAL < $LIMIT * $H)"
ok $? "final validation loss $VAL < $LIMIT x unigram entropy $H nats (first loss $FIRST)"
grep -q '"optimizer":"muon","schedule":"wsd","groups":\[{"name":"muon","tensors":14,' full.jsonl
ok $? "the log's first line names the Muon group (14 block matrices of tiny)"
grep -q '{"name":"adamw","tensors":7,' full.jsonl
ok $? "... and the AdamW group (embedding, head, 5 gains)"
M1=$(sed -n 's/.*"step":1,.*"muon_momentum":\([0-9.e+-]*\).*/\1/p' full.jsonl)
is "$M1" 0.84999999999999998 "step 1 uses the warm-up's start momentum"

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

mkdir a && cp ck/step-$(printf %08d $HALF).safetensors a/ && ln -s step-$(printf %08d $HALF).safetensors a/latest
run train a a.jsonl --resume --optimizer adamw
is "$rc" 2 "a Muon run resumed as AdamW: exit 2"
case $err in *"continues a run with optimizer muon"*) ok 0 "message: $err" ;; *) ok 1 "message: $err" ;; esac

run lm-train -m tiny --vocab 256 --context 64 -b 4 -n 1 -d d -j 1 --optimizer muon --progress
case $err in *"group muon: 14 matrices"*"group adamw: 7 tensors"*) ok 0 "--progress shows the groups" ;;
	*) ok 1 "--progress shows the groups: $err" ;; esac

# LMPIPE_MUON_CHUNK: a set's matrices in calls of at most 3 (tiny's sets
# hold 8 and 4 + 2 matrices, the transposed shape with its own: calls of
# 3 + 3 + 2 and 3 + 3, the second holding 64x32 x1 and 32x64 x2): the same
# run, and the groups line still counts whole shapes
run lm-train -m tiny --vocab 256 --context 64 -b 4 -n 3 -d d -j 1 --optimizer muon --progress -o c0
run env LMPIPE_MUON_CHUNK=3 lm-train -m tiny --vocab 256 --context 64 -b 4 -n 3 -d d -j 1 \
	--optimizer muon --progress -o c3
is "$rc" 0 "LMPIPE_MUON_CHUNK=3 runs ($err)"
case $err in *"group muon: 14 matrices"*" in 3 shapes (32x32 x8, 64x32 x4, 32x64 x2)"*) ok 0 "... and shows whole shapes" ;;
	*) ok 1 "... and shows whole shapes: $err" ;; esac
cmp -s c0/step-00000003.safetensors c3/step-00000003.safetensors
ok $? "... and its checkpoint equals one call a shape's byte for byte"

# LMPIPE_MUON_MERGE=0: 64x32 and 32x64 in sets of their own; the same run
run env LMPIPE_MUON_MERGE=0 lm-train -m tiny --vocab 256 --context 64 -b 4 -n 3 -d d -j 1 \
	--optimizer muon -o m0
is "$rc" 0 "LMPIPE_MUON_MERGE=0 runs ($err)"
cmp -s c0/step-00000003.safetensors m0/step-00000003.safetensors
ok $? "... and its checkpoint equals the merged sets' byte for byte"
done_testing
