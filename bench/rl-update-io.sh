#!/bin/sh
# bench/rl-update-io.sh: rl-update's reading and writing at the size of
# one RL round (issue 21: 256 prompts x G = 8 completions x 256 tokens on
# the ts shape): a ts-shape checkpoint (lm-train, one step on DEVICE) and
# PROMPTS x G scored rollouts of NEW tokens with token ids and log-probs
# (made by perl here, as lm-sample --jsonl writes them, then rl-reward),
# then bench/rl_update_io.c's split of the steps before the first forward
# pass and of the checkpoint write, REPEAT times, one JSON line each.
# Needs bin/ and build/ (make).  The rollouts are parsed both ways in the
# same call (a record at a time, as before; in batches on threads).
#
#   DEVICE=cpu (cuda on the GPU machine)  PROMPTS=256  G=8  NEW=256
#   REPEAT=3  THREADS= (OMP_NUM_THREADS; default all cores)  KEEP=DIR
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
B_DIR=${LMPIPE_BUILD:-$ROOT/build}
DEVICE=${DEVICE:-cpu}
PROMPTS=${PROMPTS:-256}
G=${G:-8}
NEW=${NEW:-256}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-$(nproc)}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rl-update-io.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
DIR=${KEEP:-$TMP}
mkdir -p "$DIR" "$TMP/out"

LIBS="-lzstd -ljansson -lopenblas -lm"
if pkg-config --exists ompi-c 2>/dev/null; then LIBS="$LIBS $(pkg-config --libs ompi-c)"; fi
if nm "$B_DIR/libkernels.a" 2>/dev/null | grep -q rl_tok_pg_cuda; then
	CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
	LIBS="$LIBS -L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lcublasLt -lcublas -lnccl -lcudart -lstdc++"
fi
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -march=x86-64-v2 -fopenmp -pthread ${CFLAGS:-} \
	-I"$ROOT" -I"$ROOT/libcommon" -o "$TMP/rl_update_io" "$ROOT/bench/rl_update_io.c" \
	"$B_DIR/libcommon.a" "$B_DIR/libkernels.a" ${LDFLAGS:-} $LIBS

if [ ! -e "$DIR/sc.jsonl" ]; then
	perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
		for (0 .. 255) { my $c = chr; print "t $_ \"",
			($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
		print "end\n"' > "$TMP/byte.tok"
	"$BIN/lm-task" arith -n 2000 -d 3 -r -t "$ROOT/pipelines/arith.prompt" |
		perl -MJSON::PP -ne 'my $r = decode_json($_); print $r->{prompt}, $r->{response}, "\n"' \
		> "$TMP/text.txt"
	"$BIN/bpe-encode" -t "$TMP/byte.tok" "$TMP/text.txt" | "$BIN/shard-pack" -o "$TMP/d" 2>/dev/null
	"$BIN/lm-train" --device "$DEVICE" -m ts --vocab 10000 --context 512 -b 1 -n 1 --warmup 0 \
		-d "$TMP/d" -o "$DIR/ck" --ckpt-every 1 2>/dev/null
	"$BIN/lm-task" arith -n "$PROMPTS" -d 3 -s 7 -t "$ROOT/pipelines/arith.prompt" > "$TMP/p.jsonl"
	# lm-sample --jsonl's fields: the input's, then completion, its ids,
	# log-probs (9 digits), prompt_ids, group, sample, finish_reason
	G=$G NEW=$NEW perl -MJSON::PP -e '
		srand(1); my $g = 0;
		while (my $l = <STDIN>) {
			chomp $l; my $in = decode_json($l); my @pids = map { ord } split //, $in->{prompt};
			for my $s (0 .. $ENV{G} - 1) {
				my @ids = map { 32 + int(rand(95)) } 1 .. $ENV{NEW};
				my $text = join "", map { chr } @ids;
				$text =~ s/(["\\])/\\$1/g;
				my @lp = map { sprintf "%.9g", -rand(3) } 1 .. $ENV{NEW};
				print substr($l, 0, -1), ",\"completion\":\"$text\",\"completion_ids\":[",
					join(",", @ids), "],\"logprobs\":[", join(",", @lp), "],\"prompt_ids\":[",
					join(",", @pids), "],\"group\":$g,\"sample\":$s,\"finish_reason\":\"length\"}\n";
			}
			$g++;
		}' < "$TMP/p.jsonl" > "$TMP/ro.jsonl"
	"$BIN/rl-reward" -r r1-zero "$TMP/ro.jsonl" > "$DIR/sc.jsonl"
fi
OMP_NUM_THREADS=$THREADS "$TMP/rl_update_io" "$DEVICE" "$DIR/ck/latest" "$DIR/sc.jsonl" "$TMP/out" "$REPEAT"
