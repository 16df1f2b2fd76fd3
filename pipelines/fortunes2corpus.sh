#!/bin/sh
# fortunes2corpus.sh: turn fortune(6) data files into a training corpus, one
# document per fortune, each followed by "\n<|endoftext|>\n" (the layout of
# the Gutenberg corpus in ../shared/data).  Usage: fortunes2corpus.sh [DIR]
# (default /usr/share/games/fortunes, from Debian's "fortunes" package).
set -eu
dir=${1:-/usr/share/games/fortunes}
set -- "$dir"/*
found=0
for f in "$@"; do
	case $f in *.dat|*.u8) continue ;; esac
	[ -f "$f" ] || continue
	found=1
	awk '/^%$/ { if (n) printf "\n<|endoftext|>\n"; n = 0; next }
	     { printf "%s%s", (n ? "\n" : ""), $0; n++ }
	     END { if (n) printf "\n<|endoftext|>\n" }' "$f"
done
if [ "$found" = 0 ]; then
	echo "fortunes2corpus.sh: no fortune files in $dir (apt-get install fortunes)" >&2
	exit 1
fi
