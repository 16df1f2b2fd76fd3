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
# (builtins where they do: make runs this as it reads data.mk, on the
# pipeline's serial path, where each process started costs)
abs() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/${1#./}" ;; esac; }
add() { case $1 in /*) list+=("$1") ;; *) list+=("$PWD/${1#./}") ;; esac; }
shopt -s nullglob
list=()
for w in "$@"; do
	if [ -d "$w" ]; then
		mapfile -t -O ${#list[@]} list < <(find "$w" -name '.*' -prune -o -type f -print | sort |
			while IFS= read -r f; do abs "$f"; done)
		wait $! || { echo "data-inputs.sh: $w: cannot be listed" >&2; exit 1; }
	elif [[ $w == *[*?[]* ]]; then
		m=($w)
		[ ${#m[@]} -gt 0 ] || { echo "data-inputs.sh: $w: no file matches" >&2; exit 1; }
		for f in "${m[@]}"; do add "$f"; done
	else
		add "$w"
	fi
done
bad=0
for i in "${!list[@]}"; do
	if [[ ${list[i]} == *[[:space:]:#\$%\\]* ]]; then
		printf '%d:%s\n' $((i + 1)) "${list[i]}" >&2
		bad=1
	fi
done
if [ $bad = 1 ]; then
	echo "data-inputs.sh: the names above hold a blank, ':', '#', '\$', '%' or '\\'," \
		"which make cannot take; rename or link them" >&2
	exit 1
fi
for f in "${list[@]}"; do
	[ -e "$f" ] || { echo "data-inputs.sh: $f: no such file" >&2; exit 1; }
done
[ ${#list[@]} -gt 0 ] || { echo "data-inputs.sh: no input files in: $*" >&2; exit 1; }
printf -v text '%s\n' "${list[@]}"
text=${text%$'\n'}
old=
[ -f "$out" ] && old=$(< "$out")
if [ "$old" != "$text" ]; then
	case $out in */*) [ -d "${out%/*}" ] || mkdir -p "${out%/*}" ;; esac
	printf '%s\n' "$text" > "$out.tmp.$$" && mv "$out.tmp.$$" "$out"
fi
printf '%s\n' "$text"
