#!/bin/bash
# pipelines/data-manifest.sh: the manifests of pipelines/data.mk.
#   data-manifest.sh piece W ID DIR   the shards packed in DIR (to become
#       W/shards/ID), one line each, on stdout
#   data-manifest.sh all W            W/manifest.tsv's text from the pieces'
#       manifests (W/plan.mk's order) and the tokenizer, on stdout
# A line: PATH (relative to W), split, piece, tokens, documents, bytes, SHA-256.
set -euo pipefail
export LC_ALL=C
bin=${BIN:?}
case $1 in
piece)
	w=$2 id=$3 dir=$4
	shopt -s nullglob
	shards=("$dir"/train-[0-9]*.lms "$dir"/train-val-*.lms)
	[ ${#shards[@]} -gt 0 ] || exit 0
	"$bin/shard-pack" -l "${shards[@]}" | sed 1d | while read -r tokens docs _ bytes _ path; do
		[ "$path" != total ] || continue
		name=${path##*/}
		split=train
		case $name in train-val-*) split=val ;; esac
		sum=$(sha256sum < "$path")
		printf 'shards/%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$name" "$split" "$id" \
			"$tokens" "$docs" "$bytes" "${sum%% *}"
	done
	;;
all)
	w=$2
	read -r tok _ < <(sha256sum "$w/tok.bpe")
	printf '# lmpipe data manifest, version 1: paths relative to this file\n'
	printf '# tokenizer\ttok.bpe\t%s\n' "$tok"
	printf '# path\tsplit\tpiece\ttokens\tdocuments\tbytes\tsha256\n'
	for id in $(sed -n 's/^PIECES := *//p' "$w/plan.mk"); do
		cat "$w/shards/$id/manifest.tsv"
	done | tee "$w/.manifest.body"
	awk -F'\t' '{ n[$2]++; t[$2] += $4; d[$2] += $5; b[$2] += $6 }
		END { for (s in n) printf "# total\t%s\t%d shards\t%d\t%d\t%d\n", s, n[s], t[s], d[s], b[s] }' \
		"$w/.manifest.body" | sort
	rm -f "$w/.manifest.body"
	;;
*)
	echo "data-manifest.sh: piece W ID DIR | all W" >&2
	exit 2
	;;
esac
