#!/usr/bin/env bash
# bench/bpe-learn-same.sh OLD NEW: two bpe-learn binaries write the same
# tokenizer bytes (cmp) over vocabularies, threads, the parallel-merge
# threshold, from counts and from text.  Prints one line per case and
# "N same, N differ"; exit 1 when any differs.
#   SAME_COUNTS  counts files (default: the data pipeline's, /tmp/dp/counts)
#   SAME_TEXTS   text files (default: tinyshakespeare, gutenberg_valid)
set -euo pipefail
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
DATA=${LMPIPE_DATA:-$ROOT/../shared/data}
OLD=$1 NEW=$2
read -r -a COUNTS <<< "${SAME_COUNTS:-$(ls /tmp/dp/counts/*.counts | tr '\n' ' ')}"
read -r -a TEXTS <<< "${SAME_TEXTS:-$DATA/corpus/tinyshakespeare.txt $DATA/corpus/gutenberg_valid.txt}"
W=$(mktemp -d "${TMPDIR:-/tmp}/bpe-same.XXXXXX")
trap 'rm -rf "$W"' EXIT
same=0 differ=0
# run NAME ARGS...: both binaries on ARGS, their outputs compared
run() {
	local name=$1; shift
	for pw in default 1024; do
		for j in 1 2 4; do
			for bin in OLD NEW; do
				local b=$OLD; [ $bin = NEW ] && b=$NEW
				if [ $pw = default ]; then
					"$b" -j $j "$@" -o "$W/$bin.bpe" 2> /dev/null
				else
					LMPIPE_BPE_PAR_WORDS=$pw "$b" -j $j "$@" -o "$W/$bin.bpe" 2> /dev/null
				fi
			done
			if cmp -s "$W/OLD.bpe" "$W/NEW.bpe"; then
				same=$((same + 1)) r=same
			else
				differ=$((differ + 1)) r=DIFFER
			fi
			echo "$name -j $j par_words $pw: $r"
		done
	done
}
for v in 300 1000 5000 10000 32000; do
	run "counts v$v" --special '<|endoftext|>' --from-counts -v $v "${COUNTS[@]}"
	for t in "${TEXTS[@]}"; do
		run "$(basename "$t") v$v" --special '<|endoftext|>' -v $v "$t"
	done
done
echo "$same same, $differ differ"
[ $differ = 0 ]
