#!/bin/sh
# tests/gpu/lm-train-dwlane-cuda.t: lm-train --device cuda with the
# weight-gradient queue (LMPIPE_DW_LANE: gate/up's and q/k/v's weight
# gradients on a second stream beside RMSNorm's backward in a few blocks;
# backend.h dw_begin).  Under --deterministic two runs with it give
# byte-identical checkpoints, and so do a recorded (CUDA graph) and an
# unrecorded run; it trains like the run without it (step 30's loss
# within 1 %: the weight gradients' products and RMSNorm's dw sum in other
# orders); the same with --accum 2 and on the unfused attention path
# (LMPIPE_ATTN_QKV=0); --profile has the queue's rows; unset, the queue
# is on from width 768 only.  Needs a GPU.
. "$(dirname "$0")/../lib.sh"

need_gpu
cd "$TMP"
LINES=3000
byte_shards $LINES

train() { # train DIR [OPTION]...: 30 steps on CUDA, D = 64 (the flash path), the log in DIR.jsonl
	dir=$1; shift
	lm-train --device cuda --deterministic --vocab 256 --context 256 --d-model 256 --layers 2 \
		--heads 4 --d-ff 688 -b 16 -n 30 --lr 3e-3 --warmup 5 -d d --val d-val \
		--eval-every 10 -o "$dir" --log "$dir.jsonl" "$@"
}
strip() { grep -v '"device"\|peak_device' "$1" | sed 's/,"tokens_per_s[^}]*//'; }
loss30() { sed -n 's/.*"step":30,"loss":\([0-9.e+-]*\).*/\1/p' "$1.jsonl"; }
near() { # near A B WHAT: step 30's losses within 1 %
	l1=$(loss30 "$1") l2=$(loss30 "$2")
	perl -e 'exit !($ARGV[0] ne "" && abs($ARGV[0] - $ARGV[1]) <= 0.01 * $ARGV[1])' "$l1" "$l2"
	ok $? "$3 (step 30: $l1 against $l2)"
}

LMPIPE_DW_LANE=0 run train off
is "$rc" 0 "without the queue ($err)"
for a in a b; do
	LMPIPE_DW_LANE=16,24 run train "lane-$a"
	is "$rc" 0 "with the queue, run $a ($err)"
done
cmp -s lane-a/step-00000030.safetensors lane-b/step-00000030.safetensors
ok $? "--deterministic with the queue: the two runs' checkpoints are byte-identical"
strip lane-a.jsonl > a.txt
strip lane-b.jsonl > b.txt
cmp -s a.txt b.txt
ok $? "and their logs' losses, gradient norms and validation losses"
LMPIPE_CUDA_GRAPH=0 LMPIPE_DW_LANE=16,24 run train lane-eager
is "$rc" 0 "with the queue, unrecorded ($err)"
cmp -s lane-a/step-00000030.safetensors lane-eager/step-00000030.safetensors
ok $? "the recorded step with the queue gives the unrecorded step's bits"
near lane-a off "the queue trains like the run without it"

LMPIPE_DW_LANE=0 run train acc-off -b 8 --accum 2
is "$rc" 0 "--accum 2 without the queue ($err)"
LMPIPE_DW_LANE=20 run train acc-lane -b 8 --accum 2
is "$rc" 0 "--accum 2 with the queue, 20 blocks for both ($err)"
near acc-lane acc-off "--accum 2: the queue trains like the run without it"

LMPIPE_ATTN_QKV=0 LMPIPE_DW_LANE=0 run train unf-off
is "$rc" 0 "the unfused attention path without the queue ($err)"
LMPIPE_ATTN_QKV=0 LMPIPE_DW_LANE=16,24 run train unf-lane
is "$rc" 0 "the unfused attention path with the queue ($err)"
near unf-lane unf-off "the unfused path: the queue trains like the run without it"

LMPIPE_DW_LANE=16,24 run lm-train --device cuda --vocab 256 --context 256 --d-model 256 \
	--layers 2 --heads 4 --d-ff 688 -b 16 -n 5 -d d --profile 3
is "$rc" 0 "--profile with the queue"
for row in "matmul gate_up weight gradient" "matmul qkv weight gradient"; do
	case $err in *"$row "*) ok 0 "--profile has the row '$row'" ;;
		*) ok 1 "--profile has the row '$row': $err" ;; esac
done
# unset, the queue is on from width 768 (gate/up's weight gradient alone)
run lm-train --device cuda --vocab 256 --context 256 --d-model 768 --layers 1 --heads 12 \
	--d-ff 2048 -b 8 -n 3 -d d --profile 2
is "$rc" 0 "--profile at width 768 without LMPIPE_DW_LANE"
case $err in *"matmul gate_up weight gradient "*) ok 0 "the queue is on by default at width 768" ;;
	*) ok 1 "the queue is on by default at width 768: $err" ;; esac
case $err in *"matmul qkv weight gradient "*) ok 1 "q/k/v's weight gradient stays on the main stream: $err" ;;
	*) ok 0 "q/k/v's weight gradient stays on the main stream" ;; esac
run lm-train --device cuda --vocab 256 --context 256 --d-model 256 --layers 1 --heads 4 \
	--d-ff 688 -b 8 -n 3 -d d --profile 2
is "$rc" 0 "--profile at width 256 without LMPIPE_DW_LANE"
case $err in *"weight gradient "*) ok 1 "below width 768 the queue is off by default: $err" ;;
	*) ok 0 "below width 768 the queue is off by default" ;; esac
done_testing
