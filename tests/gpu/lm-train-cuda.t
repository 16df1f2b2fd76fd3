#!/bin/sh
# tests/gpu/lm-train-cuda.t: lm-train --device cuda against --device cpu on
# the same byte-level shards and the same seed: 200 steps of a small model,
# the validation loss within 1 % of the CPU run's at every evaluation, the
# training loss's mean over each 20 steps within 1 % and every step's within
# 3 % (bf16 products as under torch.autocast).  Single steps are the noisy
# measure: the CUDA run itself moves between runs, through the atomic
# additions of the embedding and attention backward passes, and the worst
# of 200 steps measured 1.09, 1.21, 0.90 and 2.01 % on the same numerics
# (the last two in one session, at a loss of about 0.34 nats), so a bar of
# 2 % a step failed now and then on correct code; the means over 20 steps
# keep a bar as tight as the validation loss's.  A CUDA checkpoint resumes on the CPU and a CPU checkpoint
# on CUDA; --export-hf and --dump-logits run on CUDA; a checkpoint evaluates
# alike on both; lm-sample's greedy completions on CUDA equal the CPU's;
# the model variants all at once train alike on both devices, resume across
# them and sample alike.  Needs a GPU.
. "$(dirname "$0")/../lib.sh"

need_gpu
cd "$TMP"
STEPS=200 EVERY=20 LINES=4000
byte_shards $LINES

train() { # train DEVICE DIR LOG [OPTION]...
	dev=$1 dir=$2 log=$3; shift 3
	lm-train --device "$dev" --vocab 256 --context 64 --d-model 128 --layers 2 --heads 4 \
		--d-ff 352 -b 16 -n $STEPS --lr 3e-3 --warmup 20 -d d --val d-val --eval-every $EVERY \
		-o "$dir" --ckpt-every 100 --log "$log" "$@"
}
run train cpu c c.jsonl
is "$rc" 0 "CPU training runs ($err)"
run train cuda g g.jsonl
is "$rc" 0 "CUDA training runs ($err)"
grep -q '"device":"cuda"' g.jsonl
ok $? "the log names the CUDA device: $(grep -o '"backend":"[^"]*"' g.jsonl)"
losses() { sed -n "s/.*\"step\":\([0-9]*\),\"$2\":\([0-9.e+-]*\).*/\1 \2/p" "$1"; }
cmp_losses() { # cmp_losses KEY LIMIT: every logged value within LIMIT (relative)
	losses c.jsonl "$1" > a.txt
	losses g.jsonl "$1" > b.txt
	perl -e 'open A, $ARGV[0]; open B, $ARGV[1]; my ($n, $worst, $at) = (0, 0, 0);
		while (defined(my $a = <A>)) { my $b = <B>; exit 2 unless defined $b;
			my ($sa, $la) = split " ", $a; my ($sb, $lb) = split " ", $b;
			exit 3 if $sa != $sb; my $r = abs($la - $lb) / $la; $n++;
			($worst, $at) = ($r, $sa) if $r > $worst; }
		printf "%d steps, worst %.4f at step %d\n", $n, $worst, $at; exit($worst > $ARGV[2])' \
		a.txt b.txt "$2"
}
msg=$(cmp_losses loss 0.03); rc=$?
ok $rc "training loss within 3 % of the CPU run at every step ($msg)"
msg=$(perl -e 'open A, $ARGV[0]; open B, $ARGV[1]; my (@a, @b);
	while (defined(my $x = <A>)) { my $y = <B>; exit 2 unless defined $y;
		push @a, (split " ", $x)[1]; push @b, (split " ", $y)[1]; }
	my ($worst, $at, $n) = (0, 0, 0);
	for (my $i = 0; $i + 20 <= @a; $i += 20) { my ($sa, $sb) = (0, 0);
		for my $j ($i .. $i + 19) { $sa += $a[$j]; $sb += $b[$j]; }
		my $r = abs($sa - $sb) / $sa; $n++; ($worst, $at) = ($r, $i + 1) if $r > $worst; }
	printf "%d windows, worst %.4f from step %d\n", $n, $worst, $at;
	exit($n < 10 || $worst > 0.01)' a.txt b.txt); rc=$?
ok $rc "training loss: the mean of each 20 steps within 1 % of the CPU run's ($msg)"
msg=$(cmp_losses val_loss 0.01); rc=$?
ok $rc "validation loss within 1 % at every evaluation ($msg)"
echo "# last losses: cpu $(tail -2 c.jsonl | head -1 | cut -c1-60) cuda $(tail -2 g.jsonl | head -1 | cut -c1-60)"

# Checkpoints are interchangeable: the fp32 master weights are what is saved.
mkdir gc cg
cp g/step-00000100.safetensors gc/ && ln -s step-00000100.safetensors gc/latest
cp c/step-00000100.safetensors cg/ && ln -s step-00000100.safetensors cg/latest
run train cpu gc gc.jsonl --resume
is "$rc" 0 "a CUDA checkpoint resumes on the CPU ($err)"
run train cuda cg cg.jsonl --resume
is "$rc" 0 "a CPU checkpoint resumes on CUDA ($err)"
last() { sed -n 's/.*"step":200,"loss":\([0-9.e+-]*\).*/\1/p' "$1"; }
perl -e 'exit !(abs($ARGV[0] - $ARGV[1]) <= 0.01 * $ARGV[1] && abs($ARGV[2] - $ARGV[1]) <= 0.01 * $ARGV[1])' \
	"$(last gc.jsonl)" "$(last c.jsonl)" "$(last cg.jsonl)"
ok $? "resumed runs end where the uninterrupted ones do ($(last gc.jsonl), $(last c.jsonl), $(last cg.jsonl))"

run lm-train --device cuda --export-hf hf -c g/latest
is "$rc" 0 "--export-hf on CUDA ($err)"
printf '1 2 3 4\n5 6 7 8\n' > ids.txt
run lm-train --device cuda --dump-logits lg.safetensors --ids ids.txt -c g/latest
is "$rc" 0 "--dump-logits on CUDA ($err)"
# A loaded checkpoint's compute copy follows its weights: the evaluation of
# one checkpoint on both devices agrees.
vloss() { lm-train --device "$1" -c g/latest --val d-val --eval-batches 0 ${2:-} 2>/dev/null |
	sed -n 's/.*"loss":\([0-9.e+-]*\).*/\1/p'; }
vc=$(vloss cpu) vg=$(vloss cuda)
perl -e 'exit !($ARGV[0] > 0 && abs($ARGV[0] - $ARGV[1]) <= 0.01 * $ARGV[0])' "$vc" "$vg"
ok $? "-c CHECKPOINT --val: the same loss on both devices ($vc, $vg)"
# a sliding window (the targets of a window's overlap not scored) agrees too
vc=$(vloss cpu "--eval-stride 16") vg=$(vloss cuda "--eval-stride 16")
perl -e 'exit !($ARGV[0] > 0 && abs($ARGV[0] - $ARGV[1]) <= 0.01 * $ARGV[0])' "$vc" "$vg"
ok $? "--eval-stride 16: the same loss on both devices ($vc, $vg)"

# Generation: greedy completions on CUDA are the CPU's, except where the
# CPU's own logits put the two choices within bf16 rounding of each other
# (checked by a teacher-forced CPU pass, --dump-logits, at the first token
# where they part).  A byte tokenizer, prompts from the training text.
perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
awk 'NR % 97 == 5 { print substr($0, 1, 30) }' text.txt | head -12 |
	perl -MJSON::PP -ne 'chomp; print encode_json({ prompt => $_ }), "\n"' > greedy.jsonl
for dev in cpu cuda; do
	run sh -c "lm-sample --device $dev -c g/latest -t byte.tok -i greedy.jsonl --jsonl --temperature 0 --max-tokens 32 --context 64 > s-$dev.jsonl"
	is "$rc" 0 "lm-sample greedy on $dev ($err)"
done
# each parting: "LINE CPU_TOKEN CUDA_TOKEN" and the shared ids in part-LINE.txt
perl -MJSON::PP -e 'open A, $ARGV[0]; open B, $ARGV[1]; my $n = 0;
	while (defined(my $a = <A>)) { my $b = <B>; $n++; my ($x, $y) = map { decode_json($_) } $a, $b;
		my @c = @{$x->{completion_ids}}; my @g = @{$y->{completion_ids}}; my $k = 0;
		$k++ while $k < @c && $k < @g && $c[$k] == $g[$k];
		next if $k == @c && $k == @g;
		open O, ">part-$n.txt"; print O join(" ", @{$x->{prompt_ids}}, @c[0 .. $k - 1]), "\n"; close O;
		print "$n $c[$k] $g[$k]\n" }' s-cpu.jsonl s-cuda.jsonl > partings.txt
parted=0 near=0 far=""
while read -r line ct gt; do
	parted=$((parted + 1))
	lm-train --device cpu --dump-logits "part-$line.st" --ids "part-$line.txt" -c g/latest 2>/dev/null
	gap=$(perl -MJSON::PP -e 'open F, $ARGV[0] or exit 1; binmode F; read F, my $n, 8;
		my $len = unpack "Q<", $n; read F, my $h, $len; my $t = decode_json($h)->{logits} or exit 1;
		my (undef, $T, $V) = @{$t->{shape}}; seek F, 8 + $len + $t->{data_offsets}[0] + 4 * ($T - 1) * $V, 0;
		read F, my $row, 4 * $V; my @l = unpack "f<*", $row;
		printf "%.4f %.4f\n", $l[$ARGV[1]] - $l[$ARGV[2]], abs $l[$ARGV[1]]' "part-$line.st" "$ct" "$gt")
	if perl -e 'my ($g, $m) = split " ", $ARGV[0]; exit !(defined $m && $g <= 0.05 * ($m + 1))' "$gap"; then
		near=$((near + 1))
	else
		far="$far line $line (gap ${gap:-?})"
	fi
done < partings.txt
[ "$(wc -l < s-cpu.jsonl)" -eq 12 ] && [ -z "$far" ] && [ "$parted" -le 6 ]
ok $? "greedy completions on CUDA equal the CPU's: $((12 - parted)) of 12 alike, $near part at a near-tie of the CPU's logits${far:+, not near:$far}"
perl -MJSON::PP -e 'for (@ARGV) { print encode_json({ prompt => $_ }), "\n" }' a b c > p.jsonl
run sh -c 'lm-sample --device cuda -c g/latest -t byte.tok -i p.jsonl --top-p 0.9 -n 4 --seed 5 --jsonl --context 64 > j1.jsonl &&
	lm-sample --device cuda -c g/latest -t byte.tok -i p.jsonl --top-p 0.9 -n 4 --seed 5 --jsonl --context 64 > j2.jsonl'
ok $(( rc != 0 || $(wc -l < j1.jsonl) != 12 )) "lm-sample --jsonl samples on CUDA: 3 prompts x 4 samples ($err)"
cmp -s j1.jsonl j2.jsonl
ok $? "the same seed gives the same samples on CUDA"
# --stats on CUDA: the same samples; the 12 sequences are admitted in the
# first turn, which chooses their first token (up to 8, model_decode.h's
# MODEL_DECODE_AHEAD, when the device runs ahead); the later turns choose
# the rest, a token of each sequence a round
lm-sample --device cuda -c g/latest -t byte.tok -i p.jsonl --top-p 0.9 -n 4 --seed 5 --jsonl --context 64 \
	--stats > j4.jsonl 2> stats.err
cmp -s j1.jsonl j4.jsonl
ok $? "--stats on CUDA: the same samples"
sed -n 's/^lm-sample: stats: //p' stats.err > stats.json
perl -MJSON::PP -e 'open my $f, "<", "stats.json" or die; my $s = decode_json(<$f>); my $n = 0;
	open my $j, "<", "j1.jsonl" or die; $n += @{decode_json($_)->{completion_ids}} for <$j>;
	my $d = $s->{decode_tokens};
	exit !($s->{samples} == 12 && $s->{new_tokens} == $n && $d <= $n - 12 && $d >= $n - 8 * 12 && $d % 12 == 0
		&& $s->{decode_turns} >= 1 && $s->{decode_turns} <= $d / 12
		&& $s->{prefill_s} + $s->{decode_s} <= $s->{generate_s} && $s->{decode_tokens_per_s} > 0)'
ok $? "--stats on CUDA: the decoding turns' tokens ($(cat stats.err))"
# steps of 6 sequences with top-p 0.9 alone draw the nucleus by rejection
# (kernels/sample.h's sample_rejects): 3 prompts x 2 samples
run sh -c 'for i in 1 2; do lm-sample --device cuda -c g/latest -t byte.tok -i p.jsonl --top-p 0.9 -n 2 --seed 7 --jsonl --context 64 > r$i.jsonl || exit 1; done'
[ "$rc" -eq 0 ] && [ "$(wc -l < r1.jsonl)" -eq 6 ] && cmp -s r1.jsonl r2.jsonl
ok $? "6 sequences, top-p 0.9 (the nucleus by rejection): 6 samples, the same for the same seed ($err)"
# the q/k/v store and the attention over the cache as two kernels, not one
# (decode.h's attn_decode_qkv): the same bits, so the same samples
run sh -c 'LMPIPE_NO_QKV_ATTN=1 lm-sample --device cuda -c g/latest -t byte.tok -i p.jsonl --top-p 0.9 -n 4 --seed 5 --jsonl --context 64 > j3.jsonl'
cmp -s j1.jsonl j3.jsonl
ok $? "LMPIPE_NO_QKV_ATTN=1 (the cache store and attention unfused) gives the same samples ($err)"

# The model variants at once (GQA, QK-norm, ReLU^2, soft-capping, z-loss,
# norm epsilon): 60 steps on each device, the training loss within 2 % at
# every step; the CPU checkpoint resumes on CUDA; greedy sampling on CUDA
# equals the CPU's (in at least 9 of 12 lines: see below).
V="--kv-heads 2 --qk-norm --mlp relu2 --softcap 30 --z-loss 1e-4 --norm-eps 1e-6"
vtrain() { dev=$1 dir=$2; shift 2
	lm-train --device "$dev" --vocab 256 --context 64 --d-model 128 --layers 2 --heads 4 \
		--d-ff 352 -b 16 -n 60 --lr 3e-3 --warmup 10 -d d -o "$dir" --ckpt-every 30 \
		--log "$dir.jsonl" $V "$@"; }
run vtrain cpu vc
is "$rc" 0 "variants: CPU training runs ($err)"
run vtrain cuda vg
is "$rc" 0 "variants: CUDA training runs ($err)"
losses vc.jsonl loss > a.txt
losses vg.jsonl loss > b.txt
msg=$(perl -e 'open A, $ARGV[0]; open B, $ARGV[1]; my ($n, $w) = (0, 0);
	while (defined(my $a = <A>)) { my $b = <B>; exit 2 unless defined $b;
		my ($sa, $la) = split " ", $a; my (undef, $lb) = split " ", $b; $n++;
		my $r = abs($la - $lb) / $la; $w = $r if $r > $w }
	printf "%d steps, worst %.4f\n", $n, $w; exit($n != 60 || $w > 0.02)' a.txt b.txt); rc=$?
ok $rc "variants: CUDA training loss within 2 % of the CPU's at every step ($msg)"
mkdir vcg && cp vc/step-00000030.safetensors vcg/ && ln -s step-00000030.safetensors vcg/latest
run lm-train --device cuda -d d -o vcg --resume
is "$rc" 0 "variants: a CPU checkpoint resumes on CUDA ($err)"
for dev in cpu cuda; do
	run sh -c "lm-sample --device $dev -c vc/latest -t byte.tok -i greedy.jsonl --jsonl --temperature 0 --max-tokens 32 --context 64 > vs-$dev.jsonl"
	is "$rc" 0 "variants: lm-sample greedy on $dev ($err)"
done
# 60 steps leave flatter logits than 200: a bf16 near-tie may fork a line
same=$(perl -MJSON::PP -e 'open A, $ARGV[0]; open B, $ARGV[1]; my ($n, $s) = (0, 0);
	while (defined(my $a = <A>)) { my $b = <B> // last; $n++;
		$s++ if join(" ", @{decode_json($a)->{completion_ids}}) eq join(" ", @{decode_json($b)->{completion_ids}}) }
	print "$s/$n"' vs-cpu.jsonl vs-cuda.jsonl)
[ "${same%/*}" -ge 9 ] && [ "${same#*/}" -eq 12 ]
ok $? "variants: greedy completions on CUDA equal the CPU's in at least 9 of 12 lines ($same)"

run lm-train --device cuda --vocab 256 --context 64 --d-model 128 --layers 2 --heads 4 \
	--d-ff 352 -b 1000000 -n 1 -d d
is "$rc" 1 "a batch that does not fit the GPU fails cleanly (exit 1)"
case $err in *"out of GPU memory"*"smaller batch"*) ok 0 "it says so: $err" ;;
	*) ok 1 "it says so: $err" ;; esac
done_testing
