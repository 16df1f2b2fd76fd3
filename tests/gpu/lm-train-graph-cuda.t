#!/bin/sh
# tests/gpu/lm-train-graph-cuda.t: the training step recorded as a CUDA
# graph (model/train_graph.h) gives the same bits as the unrecorded step.
# Each pair runs lm-train --device cuda --deterministic (the same cuBLASLt
# algorithms on both sides) once with LMPIPE_CUDA_GRAPH=0 and once by
# default, and compares the checkpoints byte for byte and the logs' losses,
# gradient norms and validation losses: plain AdamW, --accum 3 (the first,
# middle and last micro-batch recordings), Muon (cuBLAS inside the
# recording, its lr and momentum from device memory), a WSD schedule (the
# learning rate of each step reaches the replay), ZeRO-1 and ZeRO-2 at a
# world of one (their sharded step and range buffers inside the
# recording), and a resumed run (its tensors against the uninterrupted
# run's: the metadata differs).  The logs must say which runs were
# recorded.  Last, an evaluation between recorded steps that grows the LM
# head's chunk buffer.  Needs a GPU.
. "$(dirname "$0")/../lib.sh"

need_gpu
cd "$TMP"
LINES=3000
byte_shards $LINES

train() { # train DIR [OPTION]...: 24 steps on CUDA, the log in DIR.jsonl
	dir=$1; shift
	lm-train --device cuda --deterministic --vocab 256 --context 128 --d-model 128 --layers 2 \
		--heads 4 --d-ff 352 -b 32 -n 24 --lr 3e-3 --warmup 5 -d d --val d-val --eval-every 8 \
		-o "$dir" --log "$dir.jsonl" "$@"
}
# tensors A B: the two checkpoints' tensors (all after the JSON header) equal
tensors() {
	perl -e 'for (@ARGV) { open my $f, "<:raw", $_ or die; local $/; my $d = <$f>;
		my $n = unpack "Q<", $d; push @t, substr $d, 8 + $n } exit($t[0] ne $t[1])' "$1" "$2"
}
strip() { grep -v '"device"\|peak_device' "$1" | sed 's/,"tokens_per_s[^}]*//'; }
pair() { # pair NAME [OPTION]...: unrecorded and recorded runs, the same bits
	name=$1; shift
	LMPIPE_CUDA_GRAPH=0 run train "$name-eager" "$@"
	is "$rc" 0 "$name: the unrecorded run ($err)"
	run train "$name-graph" "$@"
	is "$rc" 0 "$name: the recorded run ($err)"
	grep -q '"graph":false' "$name-eager.jsonl" && grep -q '"graph":true' "$name-graph.jsonl"
	ok $? "$name: the logs say which run replayed a recording"
	cmp -s "$name-eager/step-00000024.safetensors" "$name-graph/step-00000024.safetensors"
	ok $? "$name: the checkpoints are byte-identical"
	strip "$name-eager.jsonl" > "$name-eager.txt"
	strip "$name-graph.jsonl" > "$name-graph.txt"
	cmp -s "$name-eager.txt" "$name-graph.txt"
	ok $? "$name: losses, gradient norms and validation losses bit-identical ($(wc -l < "$name-eager.txt") lines)"
}
pair adamw
pair accum -b 8 --accum 3
pair muon --optimizer muon
pair wsd --schedule wsd --decay-frac 0.5
pair zero1 --zero 1
pair zero2 --zero 2

# a resumed run records its own graph after its first step
run train res-graph -n 12 --cycle 24
is "$rc" 0 "12 steps, recorded ($err)"
run train res-graph --resume --cycle 24
is "$rc" 0 "resumed to 24, recorded ($err)"
tensors adamw-eager/step-00000024.safetensors res-graph/step-00000024.safetensors
ok $? "12 + 12 resumed steps: the tensors equal those of 24 unrecorded steps byte for byte"
strip adamw-eager.jsonl | grep -v val_loss > a.txt
strip res-graph.jsonl | grep -v val_loss > b.txt
cmp -s a.txt b.txt
ok $? "... and every step's loss and gradient norm"

# An evaluation between recorded steps whose batch needs more rows of the
# LM head's chunk than a training step's: with V = 10000 a training
# batch of 128 x 256 rows is cut into three chunks of 10923, the 48
# validation windows are one chunk of 12288, so the chunk's buffer grows
# after the recording, which must keep replaying into the buffer it was
# recorded with (before: "step 4: an illegal memory access").
head -c 12400 text.txt | perl "$LMPIPE_ROOT/tests/bytes2tok.pl" | shard-pack -o ev
run lm-train --device cuda --vocab 10000 --context 256 --d-model 64 --layers 1 --heads 2 \
	--d-ff 128 -b 128 -n 6 --lr 1e-3 -d d --val ev --eval-every 3 -o grow --log grow.jsonl
is "$rc" 0 "an evaluation that grows the head's buffer between recorded steps ($err)"
grep -q '"graph":true' grow.jsonl && [ "$(grep -c '"val_loss"' grow.jsonl)" -eq 2 ]
ok $? "... recorded, and both evaluations logged"
done_testing
