#!/bin/sh
# bench/rl-update.sh: the wall time of one rl-update round (GRPO by
# default) on the CPU or DEVICE, on rollouts that lm-sample makes here from
# a briefly trained model, for each micro-batch size in MBS, best of REPEAT.  One JSON line
# per measurement, with the machine's load average at its start.
#
#   MODEL=s5m  PROMPTS=16  G=4  NEW=32  THREADS=(all cores)  REPEAT=3
#   DEVICE=cpu          rl-update --device (cuda on a GPU machine)
#   ALGO=grpo           any rl-update --algo taking rollouts (grpo, ppo)
#   MBS="1 4 64"        --micro-batch values; "-" runs without the option
#   KEEP=DIR            keep model and rollouts in DIR and reuse them
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
MODEL=${MODEL:-s5m}
PROMPTS=${PROMPTS:-16}
G=${G:-4}
NEW=${NEW:-32}
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-3}
ALGO=${ALGO:-grpo}
DEVICE=${DEVICE:-cpu}
MBS=${MBS:-1 4 64}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rl-update-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
CK=${KEEP:-$TMP}
mkdir -p "$CK"

if [ ! -e "$CK/ro.jsonl" ]; then
	perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
		for (0 .. 255) { my $c = chr; print "t $_ \"",
			($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
		print "end\n"' > "$CK/byte.tok"
	perl "$ROOT/tests/mktext.pl" 2000 3 | perl "$ROOT/tests/bytes2tok.pl" > "$TMP/t.tok"
	"$BIN/shard-pack" -o "$TMP/d" < "$TMP/t.tok"
	# trained a little, so that its completions are text (no NUL bytes)
	"$BIN/lm-train" -m "$MODEL" --vocab 256 -b 8 -n 60 --lr 3e-3 --warmup 10 -d "$TMP/d" -o "$CK/ck" \
		--ckpt-every 60 2>/dev/null
	perl -e 'for my $i (1 .. $ARGV[0]) { print "{\"prompt\":\"Once upon a time number $i, a\"}\n" }' \
		"$PROMPTS" > "$CK/p.jsonl"
	"$BIN/lm-sample" -c "$CK/ck/latest" -t "$CK/byte.tok" --jsonl -i "$CK/p.jsonl" -n "$G" \
		--max-tokens "$NEW" --seed 1 2>/dev/null |
		"$BIN/rl-reward" -c 'perl -ne "print /\"completion\":\" s/ ? 1 : 0, qq(\n)"' > "$CK/ro.jsonl"
fi
n=$(wc -l < "$CK/ro.jsonl")
now() { perl -MTime::HiRes=time -e 'printf "%.6f\n", time'; }
for mb in $MBS; do
	opt=""
	[ "$mb" = - ] || opt="--micro-batch $mb"
	best=""
	load=$(cut -d' ' -f1 /proc/loadavg)
	r=0
	while [ $r -lt "$REPEAT" ]; do
		t0=$(now)
		# shellcheck disable=SC2086
		"$BIN/rl-update" -c "$CK/ck/latest" -o "$TMP/out" -a "$ALGO" --device "$DEVICE" -j "$THREADS" $opt \
			"$CK/ro.jsonl" > /dev/null
		t1=$(now)
		best=$(perl -e 'my ($b, $t) = @ARGV; print $b eq "" || $t < $b ? $t : $b' "$best" \
			"$(perl -e "print $t1 - $t0")")
		r=$((r + 1))
	done
	printf '{"bench":"rl-update","device":"%s","algo":"%s","model":"%s","sequences":%s,"new_tokens":%s,"micro_batch":"%s","threads":%s,"seconds":%.3f,"load":%s}\n' \
		"$DEVICE" "$ALGO" "$MODEL" "$n" "$NEW" "$mb" "$THREADS" "$best" "$load"
done
