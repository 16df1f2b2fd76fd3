#!/bin/sh
# pipelines/paragraphs.sh CORPUS SPECIAL: a corpus without document
# separators (tinyshakespeare, a book) on stdout as documents, one per
# paragraph (a run of non-blank lines), each followed by a line holding
# SPECIAL, so that shard-pack --val-docs can draw whole documents.  The blank
# lines between paragraphs are dropped.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: paragraphs.sh CORPUS SPECIAL" >&2
	exit 2
fi
exec awk -v sep="$2" 'BEGIN { RS = "" } { printf "%s\n%s\n", $0, sep }' "$1"
