#!/bin/sh
# tests/kill9.t: runs killed with SIGKILL at random points (issue 22).
# shard-pack during a fresh run and during -f: no reader accepts the
# incomplete set (it has no manifest, or the old manifest still names the
# old, complete set); the next run removes the killed run's temporary
# files.  lm-train, killed repeatedly (often while writing a checkpoint):
# the newest checkpoint loads after each kill, a resume continues bit for bit, and the
# next start removes the temporary checkpoint files.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
ROUNDS=4 SLOW=1
[ "${LMPIPE_SANITIZE:-0}" = 1 ] && ROUNDS=2 SLOW=4

perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
perl "$LMPIPE_ROOT/tests/mktext.pl" 3000 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > a.tok
perl "$LMPIPE_ROOT/tests/mktext.pl" 2000 7 > text2.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text2.txt > b.tok
tmps() { ls -A | grep "^\.$1.*\.tmp-" || true; }
reads() { # reads PREFIX: a reader (lm-train, one step) accepts the set
	lm-train -m tiny --vocab 256 --context 32 -b 2 -n 1 -d "$1" -j 1 >/dev/null 2>"$TMP/.rerr"
}

# ---- shard-pack, fresh run: killed after two shards ----
mkfifo fifo
shard-pack -o k --shard-tokens 10000 --val-docs 10 <fifo 2>/dev/null &
pid=$!
exec 3>fifo
head -c 200000 a.tok >&3
for _ in $(seq 1500); do [ -e k-000001.lms ] && break; sleep 0.02; done
sleep 0.2
kill -KILL "$pid"; wait "$pid" 2>/dev/null
exec 3>&-
ok "$([ -e k-000001.lms ] && [ ! -e k.manifest ]; echo $?)" "killed fresh run: shards, no manifest"
[ -n "$(tmps k)" ]; ok $? "it left a temporary file ($(tmps k | head -1))"
reads k; is "$?" 1 "no reader accepts the incomplete set"
case $(cat .rerr) in *"k: no manifest k.manifest: the set is incomplete"*"shard-pack -f -o k"*) ok 0 "the message says how to redo it" ;;
*) ok 1 "the message says how to redo it: $(cat .rerr)" ;; esac
run shard-pack -o k --shard-tokens 10000 --val-docs 10 a.tok
is "$rc" 1 "without -f the killed run's shards are kept ($err)"
run shard-pack -f -o k --shard-tokens 10000 --val-docs 10 a.tok
is "$rc" 0 "-f redoes the set ($err)"
[ -z "$(tmps k)" ]; ok $? "the killed run's temporary files are gone"
reads k; ok $? "the set reads ($(cat .rerr))"
cp k.manifest k.manifest.before

# ---- shard-pack -f over that set: killed midway ----
shard-pack -f -o k --shard-tokens 10000 --val-docs 10 <fifo 2>/dev/null &
pid=$!
exec 3>fifo
head -c 200000 b.tok >&3
for _ in $(seq 1500); do [ -e k.g1-000001.lms ] && break; sleep 0.02; done
sleep 0.2
kill -KILL "$pid"; wait "$pid" 2>/dev/null
exec 3>&-
ok "$([ -e k.g1-000001.lms ]; echo $?)" "killed -f run: some new shards written"
cmp -s k.manifest k.manifest.before; ok $? "the manifest still names the old set"
reads k; ok $? "readers see the old, complete set ($(cat .rerr))"
run shard-pack -t $(sed -n 's/^\(k[^ ]*\.lms\) .*/\1/p' k.manifest)
is "$rc" 0 "every shard it names is intact ($err)"
run shard-pack -f -o k --shard-tokens 10000 --val-docs 10 b.tok
is "$rc" 0 "-f again completes ($err)"
[ -z "$(tmps k)" ] && [ -z "$(ls k-0*.lms 2>/dev/null)" ]
ok $? "old generation and temporary files removed"
grep -q "^k.g1-000000.lms " k.manifest; ok $? "the manifest names the new generation"

# ---- lm-train: killed at random points, resumed ----
shard-pack -o d < a.tok
# TEXEC=exec in a background job: lm-train replaces the job's subshell, so
# that the kill reaches it (a killed subshell leaves its lm-train running
# on, writing beside the next round's, which made this test fail 2 runs
# in 8)
T() { ${TEXEC:-} lm-train -m tiny --vocab 256 --context 32 -b 4 -n 80 --lr 1e-2 --warmup 5 -d d \
	--ckpt-every 1 -j 1 "$@"; }
T -o full --log full.jsonl 2>/dev/null
ok $? "uninterrupted run"
i=1 all_load=0 killed_in_write=0
# a run to resume: latest, or (a kill between a checkpoint's rename and the
# link's) a step file only, which --resume falls back to
resumable() { [ -e part/latest ] || ls part/step-*.safetensors > /dev/null 2>&1; }
while [ $i -le $ROUNDS ]; do
	if resumable; then TEXEC=exec T -o part --log part.jsonl --resume 2>/dev/null &
	else TEXEC=exec T -o part --log part.jsonl 2>/dev/null & fi
	pid=$!
	sleep "$(perl -e 'printf "%.2f", ('$SLOW') * (0.15 + rand(0.5))')"
	kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
	[ -n "$(ls -A part 2>/dev/null | grep '\.tmp-')" ] && killed_in_write=$((killed_in_write + 1))
	# a kill can only hit the checkpoint being written: the newest file and
	# latest are the ones to check
	for f in part/latest "$(ls part/step-*.safetensors 2>/dev/null | tail -1)"; do
		[ -e "$f" ] || continue
		lm-sample -c "$f" -t byte.tok --max-tokens 1 x >/dev/null 2>&1 ||
			{ all_load=1; echo "# $f does not load"; }
	done
	i=$((i + 1))
done
is "$all_load" 0 "after each kill the newest checkpoint and latest load ($ROUNDS kills, $killed_in_write during a checkpoint write)"
if resumable; then run T -o part --log part.jsonl --resume
else run T -o part --log part.jsonl; fi
is "$rc" 0 "the last resume finishes ($err)"
[ -z "$(ls -A part | grep '\.tmp-')" ]; ok $? "no temporary checkpoint file left"
cmp -s full/step-00000080.safetensors part/step-00000080.safetensors
ok $? "the final checkpoint equals the uninterrupted run's byte for byte"
strip() { grep -v '"device"' "$@" | sed 's/,"tokens_per_s[^}]*//'; }
strip full.jsonl > want.txt
strip part.jsonl > got.txt
cmp -s want.txt got.txt
ok $? "the metrics log has each step once, as the uninterrupted run's ($(wc -l < got.txt) lines)" ||
	diff want.txt got.txt | head -6 | sed 's/^/# /'
[ "$_tap_failed" = 0 ] || ls -A part | head -3 | sed 's/^/# left: /'

done_testing
