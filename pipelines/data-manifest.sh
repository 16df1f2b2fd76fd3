#!/bin/bash
# pipelines/data-manifest.sh: the manifests of pipelines/data.mk.
#   data-manifest.sh piece W ID DIR   the shards packed in DIR (to become
#       W/shards/ID), one line each, on stdout, read from the set manifest
#       shard-pack wrote beside them (DIR/train.manifest, man 5 lmpipe-shard):
#       tokens, documents and checksum as shard-pack recorded them, not
#       recomputed; the size from the file system
#   data-manifest.sh all W OUT        W/manifest.tsv's text from the pieces'
#       manifests (W/plan.mk's order) and the tokenizer, to OUT, and
#       lm-train's -d/--val arguments to W/lm-train.args.tmp; on stdout the
#       number of shards, then the manifest's "# total" lines (for the
#       summary, without reading the manifest again)
#   data-manifest.sh verify W         every shard of W/manifest.tsv against its
#       line (size, header checksum), then shard-pack -t (frames and index
#       against the header); the bad ones named on stderr, exit 1
# A line: PATH (relative to W), split, piece, tokens, documents, bytes, and
# the shard's CRC-32C: its header checksum, which covers the index checksum,
# which covers every frame's, so it names the whole content.
set -euo pipefail
export LC_ALL=C
bin=${BIN:?}
case $1 in
piece)
	w=$2 id=$3 dir=$4
	set_manifest=$dir/train.manifest
	[ -e "$set_manifest" ] || exit 0 # no shards (shard-pack --allow-empty)
	# "train N", then N lines "NAME TOKENS DOCUMENTS CRC", then "val M", ...
	awk -v id="$id" -v m="$set_manifest" '
		NR == 1 && $0 != "lmpipe-shard-set 1" { print m ": not a version 1 shard-set manifest" > "/dev/stderr"; exit 1 }
		($1 == "train" || $1 == "val") && NF == 2 { split_ = $1; next }
		$1 == "end" || $1 == "generation" || NR == 1 { next }
		NF >= 4 { name = $1; for (i = 2; i <= NF - 3; i++) name = name " " $i
			printf "%s\t%s\t%s\t%s\t%s\t%s\n", name, split_, id, $(NF - 2), $(NF - 1), $NF }
	' "$set_manifest" | while IFS=$'\t' read -r name split piece tokens docs crc; do
		printf 'shards/%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$name" "$split" "$piece" \
			"$tokens" "$docs" "$(stat -c %s "$dir/$name")" "$crc"
	done
	;;
all)
	# (one awk for the body, the totals, lm-train.args and the summary:
	# this stage is on the pipeline's serial path, where each process
	# started costs)
	w=$2 out=$3
	read -r tok _ < <(sha256sum "$w/tok.bpe")
	pieces=
	while IFS= read -r line; do
		case $line in "PIECES :="*) pieces=${line#PIECES :=}; break ;; esac
	done < "$w/plan.mk"
	# the pieces' manifests in plan order (awk's operands); lm-train's
	# arguments, a shard set a line, to W/lm-train.args.tmp
	manifests=()
	for id in $pieces; do manifests+=("$w/shards/$id/manifest.tsv"); done
	awk -F'\t' -v tok="$tok" -v w="$w" -v out="$out" '
		BEGIN {
			print "# lmpipe data manifest, version 2: paths relative to this file; counts and checksums from shards/*/train.manifest" > out
			printf "# tokenizer\ttok.bpe\t%s\n", tok > out
			printf "# path\tsplit\tpiece\ttokens\tdocuments\tbytes\tcrc32c\n" > out
			args = w "/lm-train.args.tmp"
			printf "" > args
			shards = 0
			for (a = 1; a < ARGC; a++) {
				f = ARGV[a]
				while ((r = (getline line < f)) > 0) {
					shards++
					print line > out
					split(line, c, "\t")
					if (!(c[2] in n))
						splits[++ns] = c[2]
					n[c[2]]++; t[c[2]] += c[4]; d[c[2]] += c[5]; b[c[2]] += c[6]
					p = w "/" c[1]
					sub(/-[0-9]+\.lms$/, "", p)
					if (!seen[p]++)
						print (c[2] == "val" ? "--val " : "-d ") p > args
				}
				if (r < 0) { print "data-manifest.sh: " f ": cannot be read" > "/dev/stderr"; exit 1 }
				close(f)
			}
			exit
		}
		END {
			for (i = 2; i <= ns; i++) # the splits in byte order, as sort(1) in C
				for (j = i; j > 1 && splits[j - 1] > splits[j]; j--) {
					s = splits[j]; splits[j] = splits[j - 1]; splits[j - 1] = s
				}
			print shards
			for (i = 1; i <= ns; i++) {
				s = splits[i]
				printf "# total\t%s\t%d shards\t%d\t%d\t%d\n", s, n[s], t[s], d[s], b[s] > out
				printf "# total\t%s\t%d shards\t%d\t%d\t%d\n", s, n[s], t[s], d[s], b[s]
			}
			close(args)
			close(out)
		}' "${manifests[@]}"
	;;
verify)
	w=$2 bad=0
	# the header checksum is the header's last 4 bytes (its length at byte 6)
	while IFS=$'\t' read -r path _ _ _ _ bytes crc; do
		f=$w/$path
		size=$(stat -c %s "$f" 2>/dev/null) || { echo "data-manifest.sh: $f: missing" >&2; bad=1; continue; }
		[ "$size" = "$bytes" ] || { echo "data-manifest.sh: $f: $size bytes, the manifest says $bytes" >&2; bad=1; continue; }
		hl=$(od -An -tu2 -j6 -N2 "$f" | tr -d ' ')
		got=$(od -An -tx4 -j$((hl - 4)) -N4 "$f" | tr -d ' ')
		[ "$got" = "$crc" ] || { echo "data-manifest.sh: $f: header checksum $got, the manifest says $crc" >&2; bad=1; }
	done < <(grep -v '^#' "$w/manifest.tsv")
	awk -F'\t' -v w="$w" '!/^#/ { print w "/" $1 }' "$w/manifest.tsv" | xargs -r "$bin/shard-pack" -t || bad=1
	exit $bad
	;;
*)
	echo "data-manifest.sh: piece W ID DIR | all W | verify W" >&2
	exit 2
	;;
esac
