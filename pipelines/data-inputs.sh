#!/bin/bash
# pipelines/data-inputs.sh OUT WORD...: the input files of pipelines/data.mk.
# Each WORD is a file, a glob or a directory (every regular file under it,
# hidden ones skipped); names come out absolute, globs and directories in
# byte order (LC_ALL=C), the words in the order given.  The list goes to
# OUT, rewritten only when it changed, and to stdout.
set -euo pipefail
export LC_ALL=C
out=$1
shift
[ $# -gt 0 ] || { echo "data-inputs.sh: no INPUTS (files, globs or directories)" >&2; exit 2; }
list=$(mktemp)
trap 'rm -f "$list"' EXIT
abs() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/${1#./}" ;; esac; }
shopt -s nullglob
for w in "$@"; do
	if [ -d "$w" ]; then
		find "$w" -name '.*' -prune -o -type f -print | sort | while IFS= read -r f; do abs "$f"; done
	elif [[ $w == *[*?[]* ]]; then
		m=($w)
		[ ${#m[@]} -gt 0 ] || { echo "data-inputs.sh: $w: no file matches" >&2; exit 1; }
		for f in "${m[@]}"; do abs "$f"; done
	else
		abs "$w"
	fi
done > "$list"
if grep -n '[[:space:]:#$%\\]' "$list" >&2; then
	echo "data-inputs.sh: the names above hold a blank, ':', '#', '\$', '%' or '\\'," \
		"which make cannot take; rename or link them" >&2
	exit 1
fi
while IFS= read -r f; do
	[ -e "$f" ] || { echo "data-inputs.sh: $f: no such file" >&2; exit 1; }
done < "$list"
[ -s "$list" ] || { echo "data-inputs.sh: no input files in: $*" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
cmp -s "$list" "$out" 2>/dev/null || cp "$list" "$out"
cat "$out"
