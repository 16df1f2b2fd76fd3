#!/bin/sh
# tests/lm-train-windows.t: lm-train --dump-windows names the windows each
# step trained on.  At --lr 0 the weights stay the initial ones, so the loss
# of step s recomputed from the dumped windows (their tokens read by the
# parity script's plain-Python reader, bench/parity_data.py, through
# shard-pack -d; the logits from --dump-logits) must equal the logged loss
# of step s; windows shifted by one token must not (the test can fail).
# Also: the windows do not depend on --dump-windows or the thread count,
# --deterministic changes nothing on the CPU (deterministic already),
# --lr 0 leaves the weights as initialised (what bench/parity.sh relies on
# for PyTorch's initial weights), and an unwritable file fails cleanly.
. "$(dirname "$0")/lib.sh"

if ! command -v python3 >/dev/null 2>&1; then
	echo "1..0 # SKIP needs python3"; exit 0
fi
cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 1500 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d --val-docs 50 --shard-tokens 20000 < text.tok
ok $? "byte-level shards, several of them"
train() { # train DIR LOG STEPS [OPTION]...
	dir=$1 log=$2 n=$3; shift 3
	lm-train -m tiny --vocab 256 --context 64 -b 16 -n "$n" --lr 0 -d d --val d-val -o "$dir" \
		--log "$log" -j 1 "$@"
}
run train ck log.jsonl 3 --dump-windows win.txt
is "$rc" 0 "train 3 steps at --lr 0 with --dump-windows ($err)"
is "$(sed -n 1p win.txt)" "lmpipe-windows 1" "the windows file's first line"
is "$(grep -c '^step ' win.txt)" 3 "one line per step"
is "$(awk '/^step 2 / { print NF - 2 }' win.txt)" 16 "a step's line holds its 16 windows"
is "$(grep -c '^train ' win.txt) $(grep -c '^val ' win.txt)" "4 1" "the training and validation shards listed"
run python3 "$LMPIPE_ROOT/bench/parity_data.py" check win.txt
is "$rc" 0 "the Python reader reads every shard and offset ($out$err)"
case $out in "train_tokens $(shard-pack -l d-0*.lms | awk '$NF ~ /lms$/ { s += $1 } END { print s }') "*)
	ok 0 "its token count is shard-pack's ($out)";;
*)	ok 1 "its token count is shard-pack's ($out)";;
esac

# The loss of each step from the dumped windows, against the log.
xent() { # xent STEP SHIFT: the mean cross-entropy of that step's windows
	python3 "$LMPIPE_ROOT/bench/parity_data.py" ids win.txt "$1" |
		awk -v s="$2" '{ for (i = 1 + s; i <= NF; i++) printf "%s%s", $i, i < NF ? " " : ""; print "" }' > ids.txt
	lm-train -c ck/step-00000003.safetensors --ids ids.txt --dump-logits logits.st 2>/dev/null || return 1
	python3 - "$LMPIPE_ROOT/bench" "$1" "$2" <<'EOF'
import json, math, struct, sys, array
sys.path.insert(0, sys.argv[1])
import parity_data as pd
step, shift = int(sys.argv[2]), int(sys.argv[3])
w = pd.Windows("win.txt")
train = pd.concat(pd.load_shards(w.train))
raw = open("logits.st", "rb").read()
n = struct.unpack_from("<Q", raw)[0]
h = json.loads(raw[8:8 + n])["logits"]
B, T, V = h["shape"]
a, b = h["data_offsets"]
z = array.array("f")
z.frombytes(raw[8 + n + a:8 + n + b])
total = 0.0
for r, o in enumerate(w.steps[step]):
    for t in range(T):
        row = z[(r * T + t) * V:(r * T + t + 1) * V]
        m = max(row)
        lse = m + math.log(sum(math.exp(x - m) for x in row))
        total += lse - row[train[o + shift + t + 1]]
print("%.9f" % (total / (B * T)))
EOF
}
close() { perl -e 'exit !(abs($ARGV[0] - $ARGV[1]) < 1e-4)' "$1" "$2"; }
for s in 1 2 3; do
	want=$(sed -n "s/.*\"step\":$s,\"loss\":\([0-9.e+-]*\).*/\1/p" log.jsonl)
	got=$(xent $s 0)
	close "$got" "$want"
	ok $? "step $s: the loss of its dumped windows $got is the logged $want"
done
want=$(sed -n 's/.*"step":2,"loss":\([0-9.e+-]*\).*/\1/p' log.jsonl)
got=$(xent 2 1)
! close "$got" "$want"
ok $? "windows shifted by a token give another loss ($got, not $want)"

run train ck2 log2.jsonl 3
grep '^step ' win.txt > a.txt
run train ck3 log3.jsonl 3 -j 2 --dump-windows win3.txt
grep '^step ' win3.txt > b.txt
cmp -s a.txt b.txt
ok $? "the same windows on 2 threads"
sed 's/,"tokens_per_s[^}]*//; /"device"/d' log.jsonl > l1.txt
sed 's/,"tokens_per_s[^}]*//; /"device"/d' log2.jsonl > l2.txt
cmp -s l1.txt l2.txt
ok $? "a run without --dump-windows logs the same losses"
run train ck6 log6.jsonl 3 --deterministic
sed 's/,"tokens_per_s[^}]*//; /"device"/d' log6.jsonl > l6.txt
cmp -s l1.txt l6.txt && cmp -s ck/step-00000003.safetensors ck6/step-00000003.safetensors
ok $? "--deterministic on the CPU changes nothing (exit $rc)"

# --lr 0: the weights stay the initial ones (bench/parity.sh's step 0).
run train ck4 log4.jsonl 1
lm-train -c ck4/step-00000001.safetensors --export-hf hf1 2>/dev/null &&
	lm-train -c ck/step-00000003.safetensors --export-hf hf3 2>/dev/null
cmp -s hf1/model.safetensors hf3/model.safetensors
ok $? "--lr 0: the weights after 1 and after 3 steps are the same"

# The parity script's PyTorch side needs torch (not here): it compiles.
run python3 -c 'import ast, sys; [ast.parse(open(f).read(), f) for f in sys.argv[1:]]' \
	"$LMPIPE_ROOT/bench/parity.py" "$LMPIPE_ROOT/bench/parity_data.py"
is "$rc" 0 "bench/parity.py and parity_data.py parse ($err)"
sh -n "$LMPIPE_ROOT/bench/parity.sh"
ok $? "bench/parity.sh parses"

run train ck5 log5.jsonl 2 --dump-windows nodir/win.txt
is "$rc" 1 "an unwritable windows file fails with exit 1"
case $err in *nodir/win.txt*) ok 0 "naming it ($err)";; *) ok 1 "naming it ($err)";; esac
done_testing
