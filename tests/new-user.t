#!/bin/sh
# tests/new-user.t: what a new user trips over, smoothed: a run's directory
# given where a checkpoint is wanted (lm-sample, rl-update, lm-train -c)
# means its latest checkpoint, and a directory without one is named as
# such; a shard set's manifest path given for its PREFIX is that PREFIX;
# training without -o says on a terminal that nothing will be saved (and
# says nothing when stderr is a file or a pipe, where scripts leave -o out
# on purpose); a program reading a terminal says so; JSON records without
# --jsonl, and plain samples where rollouts are wanted, are told the option;
# --val alone evaluates at the end, and --eval-every without --val or
# --ckpt-every and --keep-last without -o, a Muon option to an AdamW run and
# a WSD one to another schedule are usage errors, not ignored.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
perl "$LMPIPE_ROOT/tests/mktext.pl" 300 1 | perl "$LMPIPE_ROOT/tests/bytes2tok.pl" > t.tok
shard-pack -o d --val-docs 5 < t.tok
T() { lm-train -m tiny --vocab 256 --context 32 -b 4 --lr 1e-2 --warmup 2 -j 1 "$@"; }
T -d d -n 3 -o run 2> /dev/null
ok $? "a short run in run/"
printf 'lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n' > bytes.bpe
i=0; while [ $i -lt 256 ]; do printf 't %d "\\x%02x"\n' $i $i >> bytes.bpe; i=$((i + 1)); done
echo end >> bytes.bpe

# a run's directory for its latest checkpoint
lm-sample -c run/latest -t bytes.bpe -s 3 --max-tokens 8 --temperature 0 ab > a.txt 2> /dev/null
lm-sample -c run -t bytes.bpe -s 3 --max-tokens 8 --temperature 0 ab > b.txt 2> b.err
ok $? "lm-sample -c run: accepted" || sed 's/^/# /' b.err
is "$(cmp a.txt b.txt && echo same)" same "... the samples of run/latest"
lm-sample -c run/ -t bytes.bpe -s 3 --max-tokens 8 --temperature 0 ab > c.txt 2> /dev/null
is "$(cmp a.txt c.txt && echo same)" same "... and of run/ (a trailing slash)"
is "$(lm-train -c run --info | head -1)" "$(lm-train -c run/latest --info | head -1)" "lm-train -c run --info: run/latest's"
mkdir empty
run lm-sample -c empty -t bytes.bpe ab
is "$rc:$err" "1:lm-sample: empty: a directory, not a file (a run's directory holds its last checkpoint as 'latest')" \
	"a directory without a checkpoint: named as one"
printf '{"prompt":"ab","response":"cd"}\n' > sft.jsonl
rl-update -a sft -c run -t bytes.bpe -o up sft.jsonl > up.json 2> up.err
ok $? "rl-update -c run: accepted" || sed 's/^/# /' up.err

# lm-task's JSON records given to lm-sample without --jsonl, and lm-sample's
# plain text given where rollouts are wanted: each is told the option
printf '{"prompt":"ab","answer":"1"}\n' | lm-sample -c run -t bytes.bpe --max-tokens 2 > /dev/null 2> js.err
is "$(cat js.err)" 'lm-sample: <stdin>:1: a JSON record with a "prompt", taken as plain text: give --jsonl to read its prompt' \
	"JSON records without --jsonl: the option is named"
printf 'ab\n' | lm-sample -c run -t bytes.bpe --max-tokens 2 > /dev/null 2> js2.err
is "$(cat js2.err)" "" "... and plain prompts are not remarked on"
lm-sample -c run -t bytes.bpe --max-tokens 2 ab > plain.out 2> /dev/null
for p in "rl-reward" "rl-update -a grpo -c run -t bytes.bpe -o up2"; do
	run $p plain.out
	case $err in *"plain.out:1: bad JSON: "*"; it is lm-sample's plain text: lm-sample --jsonl writes JSON Lines") r=0 ;; *) r=1 ;; esac
	ok $r "${p%% *} on lm-sample's plain text: says what writes rollouts ($err)"
done

# --val alone evaluates at the end; options that would do nothing alone
T -d d --val d-val -n 3 --log v.jsonl 2> /dev/null
is "$(grep -c '"val_loss"' v.jsonl)" 1 "--val without --eval-every: the validation loss at the end"
run T -d d -n 2 --eval-every 1
is "$rc:$err" "2:lm-train: --eval-every needs --val PREFIX (the validation shards)" "--eval-every without --val: a usage error"
run T -d d -n 2 --ckpt-every 1
is "$rc:$err" "2:lm-train: --ckpt-every needs --out DIR (where checkpoints go)" "--ckpt-every without -o: a usage error"
run T -d d -n 2 --keep-last 1
is "$rc:$err" "2:lm-train: --keep-last needs --out DIR (where checkpoints go)" "--keep-last without -o: a usage error"
run T -d d -n 2 --muon-lr 0.05 -o never
is "$rc:$err" "2:lm-train: --muon-lr is for --optimizer muon (this run's optimizer is adamw)" "a Muon option to an AdamW run: a usage error"
[ ! -e never ]; ok $? "... before -o is made"
run T -d d -n 2 --decay-frac 0.3
is "$rc:$err" "2:lm-train: --decay-frac is for --schedule wsd (this run's schedule is cosine)" "a WSD option to a cosine schedule: a usage error"
T -d d -n 2 --optimizer muon --schedule wsd -o mu 2> /dev/null
ok $? "a Muon run with a WSD schedule"
run T -d d -n 3 -o mu --resume --muon-lr 0.01 --decay-frac 0.5
is "$rc" 0 "... resumed with Muon and WSD options (the optimizer and schedule are the checkpoint's) ($err)"

# the manifest's path for its prefix
T -d d.manifest -n 2 --log m1.jsonl 2> m.err
ok $? "lm-train -d d.manifest: trains" || sed 's/^/# /' m.err
T -d d -n 2 --log m2.jsonl 2> /dev/null
is "$(sed 's/"tokens_per_s".*//' m1.jsonl)" "$(sed 's/"tokens_per_s".*//' m2.jsonl)" "... on the shards of -d d"

# no -o: said on a terminal only
T -d d -n 1 2> quiet.err
is "$(cat quiet.err)" "" "no -o, stderr a file: nothing said"
if command -v script > /dev/null && script -qec true /dev/null > /dev/null 2>&1; then
	script -qec "lm-train -m tiny --vocab 256 --context 32 -b 4 -j 1 -d d -n 1" /dev/null > tty.out 2>&1
	grep -q "lm-train: no --out DIR: the trained model will not be saved" tty.out
	ok $? "no -o, stderr a terminal: the user is told" || sed 's/^/# /' tty.out | head -5
	script -qec "lm-train -m tiny --vocab 256 --context 32 -b 4 -j 1 -d d -n 1 -o run2" /dev/null > tty2.out 2>&1
	! grep -q "no --out DIR" tty2.out; ok $? "... and not with -o"
	# a program reading standard input from a terminal says so (Ctrl-D typed)
	printf 'ab\n\004' | timeout 20 script -qec "bpe-encode -t bytes.bpe -o typed.tok" /dev/null > typed.out 2>&1
	grep -q "bpe-encode: reading standard input from the terminal (Ctrl-D ends it; or give a FILE)" typed.out
	ok $? "bpe-encode on a terminal's input: says it reads it" || sed 's/^/# /' typed.out | head -5
	printf 'ab\n' | bpe-encode -t bytes.bpe | cmp -s - typed.tok
	ok $? "... and encodes what was typed"
	echo ab | bpe-encode -t bytes.bpe 2> piped.err > /dev/null
	is "$(cat piped.err)" "" "... but nothing is said of a pipe"
else
	echo "# no script(1) to give a program a terminal: the terminal cases not checked"
fi
done_testing
