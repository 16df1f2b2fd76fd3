#!/bin/bash
# tests/data-pipeline.t: pipelines/data.mk on a small corpus of several files
# (plain, gzip, zstd and xz; one file cut into byte ranges): the tokenizer and
# the shards are the same bytes with -j 1 and -j 2 and with N = 1 and N = 3
# tasks (LAUNCH=parallel on this host) and with PRE=0 (the text encoded again
# in the shards stage, not its pre-tokens), the tokenizer is the one bpe-learn
# learns from the whole corpus at once, a second run does nothing, a changed
# parameter redoes only what depends on it, a kill -9 in the middle of either
# stage and a re-run give the uninterrupted output, progress shows on a
# terminal (script(1)) and not in a file, SEP=line with a glob of inputs
# works, and bad input (a missing file, a JSON line without "text", a corrupt
# xz file, a UTF-16 file, a NUL byte in a cut) names the file and line, fails its piece, keeps the
# others' output and accepts nothing partial; an unreadable file
# (/proc/self/mem, which fails to read even for root) the same; a piece that
# fails while packing leaves none of its shards, and the re-run repacks it
# alone.
. "$(dirname "$0")/lib.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL  # this make is not a sub-make of the one running the tests
for p in gzip zstd xz; do
	command -v $p > /dev/null || { echo "1..0 # SKIP $p is not installed (pipelines/deps.sh)"; exit 0; }
done
cd "$TMP" || exit 1
EOT='<|endoftext|>'
mkdir corpus
# documents of 1 to 8 sentences, each ended by EOT; 4 files, ~200 KB in all
for s in 1 2 3 4; do
	perl "$LMPIPE_ROOT/tests/mktext.pl" 900 $s | awk -v eot="$EOT" -v s=$s \
		'{ printf "%s\n", $0 } (NR * s) % 7 == 0 { printf "%s\n", eot } END { printf "%s\n", eot }' \
		> "corpus/part$s.txt"
done
gzip corpus/part2.txt
zstd -q --rm corpus/part3.txt
xz corpus/part4.txt
cp /dev/null corpus/empty.txt

MK=$LMPIPE_ROOT/pipelines/data.mk
OPTS=(BIN="$LMPIPE_BIN" INPUTS="$TMP/corpus" VOCAB=400 PIECE_BYTES=8Ki VAL_FRACTION=0.2 SEED=7)
data() { # data W [VAR=VALUE]... : run the pipeline into W, output in W.log
	local w=$1; shift
	make -s -f "$MK" "${OPTS[@]}" W="$TMP/$w" "$@" > "$TMP/$w.log" 2>&1
}
digest() { # the tokenizer, the manifest and every shard of W, as one hash
	(cd "$TMP/$1" && find tok.bpe manifest.tsv shards -name '*.tmp' -prune -o -type f -print |
		LC_ALL=C sort | xargs sha256sum | sha256sum)
}
show() { sed 's/^/# /' "$TMP/$1.log" | tail -15; }

data ref -j1; ok $? "the pipeline runs (-j 1)" || show ref
ref=$(digest ref)
n=$(grep -vc '^#' ref/manifest.tsv)
[ "$n" -ge 10 ] && grep -q 'val' ref/manifest.tsv
ok $? "shards of several pieces ($n), train and validation"
[ "$(wc -l < ref/plan.tsv)" -gt 5 ] && grep -q "part1.txt	8192	16384" ref/plan.tsv
ok $? "the plain file is cut into byte ranges, compressed files are whole"
# make -j starts the largest pieces first: plan.mk's PIECES_BY_SIZE is the
# pieces by the bytes of their documents (plan.tsv's 4th column), which add
# up to the plain file's size over its ranges
want=$(awk -F'\t' '{ printf "%d %06d\n", $4, NR - 1 }' ref/plan.tsv | LC_ALL=C sort -k1,1nr -k2,2 |
	awk '{ printf " %s", $2 }')
got=$(sed -n 's/^PIECES_BY_SIZE :=//p' ref/plan.mk)
sum=$(awk -F'\t' '$1 ~ /part1.txt$/ { b += $4 } END { print b }' ref/plan.tsv)
[ -n "$got" ] && [ "$got" = "$want" ] && [ "$got" != "$(sed -n 's/^PIECES :=//p' ref/plan.mk)" ] &&
	[ "$sum" = "$(stat -c %s corpus/part1.txt)" ]
ok $? "the pieces are made largest first (by their documents' bytes: $sum of part1.txt)"
order=$(cd ref/counts && ls -1tr [0-9]*.counts | sed 's/\.counts$//' | tr '\n' ' ')
is "$order" "${got# } " "make -j 1 counted them in that order"
grep -q '^data.mk: plan: [0-9]* pieces of 5 files, [0-9.]* s$' ref.log &&
	grep -q '^data.mk: counts: .* pieces, [0-9]* bytes, [0-9.]* s$' ref.log &&
	grep -q '^data.mk: tokenizer: vocabulary 400 from [0-9]* counts files, [0-9.]* s$' ref.log &&
	grep -q '^data.mk: shards: .* pieces, [0-9]* tokens, [0-9]* documents, [0-9]* bytes of shards, [0-9.]* s$' ref.log &&
	grep -q "^data.mk: manifest: $n shards, [0-9.]* s$" ref.log
ok $? "a summary line per stage (time, bytes, tokens)" || show ref

# the same tokenizer as one bpe-learn over the whole corpus
for f in corpus/*; do doc-cat "$f"; done > all.txt
bpe-learn -v 400 --special "$EOT" -o all.bpe all.txt 2> /dev/null
cmp -s all.bpe ref/tok.bpe; ok $? "the tokenizer equals bpe-learn's on the whole corpus"
# and the same tokens, document by document
ids_ref=$(bpe-encode -t all.bpe all.txt | shard-pack -o whole --allow-empty 2>&1 && shard-pack -d whole-000000.lms | od -An -tu2 | wc -w)
ids=$(awk -F'\t' '!/^#/ { print "ref/" $1 }' ref/manifest.tsv | xargs shard-pack -d | od -An -tu2 | wc -w)
is "$ids" "$ids_ref" "as many tokens in the shards as in the whole corpus encoded at once"
shard-pack -t $(awk -F'\t' '!/^#/ { print "ref/" $1 }' ref/manifest.tsv) > /dev/null 2>&1
ok $? "every shard verifies"
make -s -f "$MK" "${OPTS[@]}" W="$TMP/ref" verify > verify.log 2>&1
ok $? "make verify: every shard's checksums" || show verify
cp -a ref vbad
f=vbad/$(awk -F'\t' '!/^#/ { print $1; exit }' vbad/manifest.tsv)
printf 'X' | dd of="$f" bs=1 seek=200 conv=notrunc 2> /dev/null
make -s -f "$MK" "${OPTS[@]}" W="$TMP/vbad" verify > vbad.log 2>&1
[ $? != 0 ] && grep -q "${f#vbad/}" vbad.log; ok $? "make verify: a corrupt shard fails, named" || show vbad
rm -rf vbad
# the manifest's columns are those of each piece's set manifest (shard-pack's
# own record), and agree with the shards themselves
line=$(grep -v '^#' ref/manifest.tsv | head -1)
IFS=$'\t' read -r path split piece tokens docs bytes crc <<< "$line"
listed=$(shard-pack -l "ref/$path" | awk 'NR == 2 { print $1, $2, $4 }')
is "$tokens $docs $bytes" "$listed" "manifest: tokens, documents and bytes as shard-pack -l lists them"
grep -q "^${path##*/} $tokens $docs $crc\$" "ref/shards/$piece/train.manifest"
ok $? "manifest: the checksum is the one of the piece's set manifest ($crc)"
grep -q '^# path	split	piece	tokens	documents	bytes	crc32c$' ref/manifest.tsv; ok $? "manifest: its columns"
cp -a ref vbad
awk -F'\t' 'BEGIN { OFS = "\t" } !/^#/ && !done { $7 = "00000000"; done = 1 } { print }' ref/manifest.tsv > vbad/manifest.tsv
make -s -f "$MK" "${OPTS[@]}" W="$TMP/vbad" verify > vbad.log 2>&1
[ $? != 0 ] && grep -q "$path: header checksum $crc, the manifest says 00000000" vbad.log
ok $? "make verify: a shard whose checksum is not the manifest's fails, named" || show vbad
rm -rf vbad
# shellcheck disable=SC2046
lm-train $(cat ref/lm-train.args) -o ck -m tiny --vocab 400 --context 32 --d-model 16 --layers 1 \
	--heads 2 --d-ff 32 -b 2 -n 2 --eval-every 2 -j 1 > train.log 2>&1 && [ -s ck/latest ]
ok $? "lm-train reads the shards through W/lm-train.args" || show train

data j2 -j2; ok $? "-j 2 runs" || show j2
is "$(digest j2)" "$ref" "-j 2: byte-identical tokenizer, manifest and shards"
data g3 -j2 GROUP=3; ok $? "GROUP=3: counts merged in groups of 3 pieces first" || show g3
[ -s g3/counts/group-0000.counts ] && grep -q 'from [0-9]* counts files' g3.log
ok $? "... into group files"
is "$(digest g3)" "$ref" "GROUP=3: byte-identical"
# the text pre-tokenized once (W/pre, the default) or again in the shards stage
[ -s ref/pre/000000.pre ] && [ "$(ls ref/pre/*.pre | wc -l)" = "$(wc -l < ref/plan.tsv)" ]
ok $? "the counts task keeps each piece's pre-tokens (W/pre)"
data p0 -j2 PRE=0; ok $? "PRE=0 runs" || show p0
is "$(digest p0)" "$ref" "PRE=0 (the shards stage encodes the text): byte-identical"
[ ! -e p0/pre ] && cmp -s p0/counts/000003.counts ref/counts/000003.counts
ok $? "... without W/pre, and with the same counts files (bpe-learn's)"
data t2 -j1 THREADS=2; ok $? "THREADS=2 runs" || show t2
[ ! -e t2/pre ] && [ "$(digest t2)" = "$ref" ]
ok $? "THREADS=2: PRE=0 by default (threads a piece), byte-identical"
if command -v parallel > /dev/null; then
	for n in 1 3; do
		data par$n -j1 LAUNCH=parallel N=$n; ok $? "LAUNCH=parallel N=$n runs" || show par$n
		is "$(digest par$n)" "$ref" "N=$n: byte-identical"
	done
else
	echo "ok # SKIP GNU parallel is not installed (pipelines/deps.sh): N = 1 and 3 through LAUNCH=parallel"
fi

# a finished run does nothing; a changed parameter redoes what depends on it
mtimes() { find "$TMP/$1" -type f -printf '%p %T@\n' | LC_ALL=C sort; }
before=$(mtimes ref)
data ref -j2; ok $? "a second run succeeds"
[ ! -s ref.log ] && [ "$(mtimes ref)" = "$before" ]
ok $? "a second run does nothing" || show ref
tok_time=$(stat -c %Y.%y ref/tok.bpe) man_time=$(stat -c %Y.%y ref/manifest.tsv)
data ref -j2 VAL_FRACTION=0.5
[ "$(stat -c %Y.%y ref/tok.bpe)" = "$tok_time" ] && [ "$(stat -c %Y.%y ref/manifest.tsv)" != "$man_time" ]
ok $? "a new VAL_FRACTION redoes the shards, not the tokenizer"
data ref -j2
is "$(digest ref)" "$ref" "and back: the first shards again"
counts_time=$(stat -c %Y.%y ref/counts/000000.counts) tok_time=$(stat -c %Y.%y ref/tok.bpe)
pre_time=$(stat -c %Y.%y ref/pre/000000.pre)
data ref -j2 VOCAB=300
[ "$(stat -c %Y.%y ref/counts/000000.counts)" = "$counts_time" ] &&
	[ "$(stat -c %Y.%y ref/pre/000000.pre)" = "$pre_time" ] &&
	[ "$(stat -c %Y.%y ref/tok.bpe)" != "$tok_time" ] && [ "$(digest ref)" != "$ref" ]
ok $? "a new VOCAB redoes the tokenizer and the shards, not the counts nor the pre-tokens"
data ref -j2
is "$(digest ref)" "$ref" "and back: the first tokenizer and shards again"

# progress on a terminal: the pieces done per stage (script(1) gives make
# a terminal); none in a file (the logs above)
if command -v script > /dev/null; then
	script -qec "make -s -f $MK ${OPTS[*]} W=$TMP/tty -j2" /dev/null > tty.log 2>&1
	pieces=$(wc -l < tty/plan.tsv)
	grep -aq "data.mk: counts: $pieces/$pieces pieces" tty.log &&
		grep -aq "data.mk: shards: $pieces/$pieces pieces" tty.log &&
		grep -aq 'data.mk: shards: .* bytes of shards, [0-9.]* s' tty.log
	ok $? "on a terminal: the pieces done per stage, and the summaries" ||
		tr '\r' '\n' < tty.log | sed 's/^/# /' | tail
	is "$(cat ref.log j2.log | grep -c ' pieces $')" 0 "into a file: no progress, the summaries only"
	is "$(digest tty)" "$ref" "... and the same bytes"
else
	echo "ok # SKIP script(1) is not installed: no terminal for the progress"
	echo "ok # SKIP script(1) is not installed"
	echo "ok # SKIP script(1) is not installed"
fi

# documents one per line (SEP=line), the inputs a glob
mkdir lines
for s in 1 2 3; do perl "$LMPIPE_ROOT/tests/mktext.pl" 300 $s > lines/l$s.txt; done
cp lines/l1.txt lines/skip.md
data sl -j2 INPUTS="$TMP/lines/*.txt" SEP=line VOCAB=300 VAL_FRACTION=0
ok $? "SEP=line, INPUTS a glob" || show sl
is "$(awk -F'\t' '!/^#/ { d += $5 } END { print d }' sl/manifest.tsv)" 900 "... a document per line of the files it matches"

# kill -9 in the middle of each stage, then a re-run
mkdir slowbin
for p in doc-cat bpe-learn bpe-encode shard-pack; do
	printf '#!/bin/sh\nsleep 0.3\nexec "%s/%s" "$@"\n' "$LMPIPE_BIN" $p > slowbin/$p
	chmod +x slowbin/$p
done
kill_when() { # kill_when W GLOB COUNT: start a slow run, kill -9 it when COUNT files match
	local w=$1 glob=$2 count=$3
	setsid make -s -f "$MK" "${OPTS[@]}" W="$TMP/$w" BIN="$TMP/slowbin" -j2 > "$TMP/$w.log" 2>&1 &
	local pid=$! i=0
	while [ $i -lt 600 ]; do
		# shellcheck disable=SC2086
		[ "$(ls -d $TMP/$w/$glob 2>/dev/null | wc -l)" -ge "$count" ] && break
		sleep 0.05; i=$((i + 1))
	done
	kill -9 -- -$pid 2> /dev/null
	wait $pid 2> /dev/null
}
kill_when k1 'counts/*.counts' 3
[ ! -e k1/tok.bpe ]; ok $? "killed while counting"
data k1 -j2; ok $? "the re-run completes" || show k1
is "$(digest k1)" "$ref" "killed while counting: the re-run equals the uninterrupted run"
kill_when k2 'shards/*/manifest.tsv' 4
[ -e k2/tok.bpe ] && [ ! -e k2/manifest.tsv ]; ok $? "killed while packing"
tok_time=$(stat -c %Y.%y k2/tok.bpe)
data k2 -j2; ok $? "the re-run completes" || show k2
is "$(digest k2)" "$ref" "killed while packing: the re-run equals the uninterrupted run"
is "$(stat -c %Y.%y k2/tok.bpe)" "$tok_time" "the re-run did not redo the tokenizer"
is "$(ls -d k2/shards/*.tmp 2>/dev/null | wc -l)" 0 "no unfinished piece left"

# bad input: named, its piece fails, the other pieces' output is kept
mkdir bad
printf '{"text":"a %s"}\n' $(seq 1 50) > bad/good1.jsonl
printf '{"text":"b %s"}\n' $(seq 1 50) | gzip > bad/good2.jsonl.gz
{ printf '{"text":"c"}\n{"text":"d"}\n{"txt":"e"}\n'; } > bad/bad.jsonl
J=(INPUTS="$TMP/bad" FORMAT=jsonl VAL_FRACTION=0)
data jb -j2 "${J[@]}"
is "$?" 2 "a JSON line without \"text\": make fails"
grep -q "doc-cat: $TMP/bad/bad.jsonl:3: no \"text\" member" jb.log; ok $? "... naming the file and the line" || show jb
[ -s jb/counts/000001.counts ] && [ -s jb/counts/000002.counts ] && [ ! -e jb/counts/000000.counts ] &&
	[ ! -e jb/tok.bpe ] && [ ! -e jb/manifest.tsv ]
ok $? "... the other pieces' counts kept, nothing partial, no tokenizer" || ls -R jb | sed 's/^/# /'
good_time=$(stat -c %Y.%y jb/counts/000001.counts)
printf '{"text":"c"}\n{"text":"d"}\n{"text":"e"}\n' > bad/bad.jsonl
data jb -j2 "${J[@]}"; ok $? "fixed, the re-run completes" || show jb
is "$(stat -c %Y.%y jb/counts/000001.counts)" "$good_time" "... without recounting the good pieces"
is "$(awk -F'\t' '!/^#/ { d += $5 } END { print d }' jb/manifest.tsv)" 103 "... with every document"

head -c 300 "$(ls corpus/*.xz)" > bad/cut.xz
data xb -j2 INPUTS="$TMP/bad/cut.xz $TMP/corpus/part1.txt"
is "$?" 2 "a corrupt xz file: make fails"
grep -q "doc-cat: $TMP/bad/cut.xz: corrupt or truncated xz data (xz -dc exited with 1), after [0-9]* bytes (in line [0-9]*) of text" xb.log
ok $? "... the xz file named, with the line" || show xb
[ "$(ls xb/counts/*.counts | wc -l)" -ge 3 ] && [ ! -e xb/counts/000000.counts ]
ok $? "... the good file's pieces counted, not the bad one's"

# An unreadable file.  The tests run as root, who reads a chmod 000 file
# anyway; /proc/self/mem is a regular file that every reader fails to read
# (its own address 0 is not mapped: EIO), root or not.
ln -s /proc/self/mem bad/unreadable.txt
data ub -j2 INPUTS="$TMP/bad/unreadable.txt $TMP/corpus/part1.txt"
is "$?" 2 "an unreadable file: make fails"
grep -q "doc-cat: $TMP/bad/unreadable.txt: read error: Input/output error" ub.log
ok $? "... naming the file" || show ub
[ "$(ls ub/counts/*.counts | wc -l)" -ge 3 ] && [ ! -e ub/counts/000000.counts ] &&
	[ -z "$(ls ub/counts/ | grep -v '^[0-9]*\.counts$')" ] && [ ! -e ub/tok.bpe ]
ok $? "... its piece fails, leaving no partial counts; the other file's pieces are counted" || ls -A ub/counts | sed 's/^/# /'
data ub -j2 INPUTS="$TMP/corpus/part1.txt"
ok $? "without it, the re-run completes" || show ub
[ ! -e ub/counts/000000.counts.tmp ] && [ -z "$(ls -d ub/shards/*.tmp 2>/dev/null)" ]
ok $? "... with nothing of the failed piece left"

# a file that declares another encoding (a UTF-16 byte-order mark)
printf '\377\376a\000b\000' > bad/u16.txt
data u16 -j2 INPUTS="$TMP/bad/u16.txt $TMP/corpus/part1.txt"
is "$?" 2 "a UTF-16 file: make fails"
grep -q "doc-cat: $TMP/bad/u16.txt: UTF-16 or UTF-32 text (byte-order mark FF FE)" u16.log
ok $? "... naming the file and the encoding" || show u16
[ "$(ls u16/counts/*.counts | wc -l)" -ge 3 ] && [ ! -e u16/counts/000000.counts ] && [ ! -e u16/tok.bpe ]
ok $? "... its piece fails, the other file's pieces are counted"

# a NUL byte in a cut of a plain file (a cut is read in place, by
# bpe-encode -r): named with its offset, that piece fails, the others count
{ head -c 20000 corpus/part1.txt; printf 'x\000y'; tail -c +20001 corpus/part1.txt; } > bad/nul.txt
data nb -j2 INPUTS="$TMP/bad/nul.txt"
is "$?" 2 "a NUL byte in a cut of a plain file: make fails"
grep -q "bpe-encode: $TMP/bad/nul.txt: byte 20001: a NUL byte: binary data, not text" nb.log
ok $? "... naming the file and the byte" || show nb
grep -q "CUT_000002 := 1" nb/plan.mk && [ ! -e nb/counts/000002.counts ] && [ -e nb/counts/000001.counts ] &&
	[ -e nb/counts/000003.counts ] && [ ! -e nb/tok.bpe ]
ok $? "... its piece (a cut) fails, the other pieces are counted" || ls -A nb/counts | sed 's/^/# /'

# a piece that fails while packing (a shard-pack that fails for piece 2
# once its shards are written): none of its shards is kept or accepted
# later, the other pieces' are
mkdir failbin
for p in doc-cat bpe-learn bpe-encode; do ln -s "$LMPIPE_BIN/$p" failbin/$p; done
printf '#!/bin/sh\n"%s/shard-pack" "$@" || exit\ncase "$*" in *shards/000002.tmp/*) echo "shard-pack: planted failure" >&2; exit 1 ;; esac\n' \
	"$LMPIPE_BIN" > failbin/shard-pack
chmod +x failbin/shard-pack
data sf -j2 BIN="$TMP/failbin"
is "$?" 2 "a piece fails while packing: make fails"
n_sf=$(ls sf/shards/*/manifest.tsv | wc -l)
[ ! -e sf/shards/000002 ] && [ -z "$(ls -d sf/shards/*.tmp 2>/dev/null)" ] && [ ! -e sf/manifest.tsv ] &&
	[ "$n_sf" -eq $(($(wc -l < sf/plan.tsv) - 1)) ]
ok $? "... nothing of that piece left, every other piece's shards kept ($n_sf), no manifest" ||
	ls sf/shards | sed 's/^/# /'
kept=$(stat -c %Y.%y sf/shards/000001/manifest.tsv)
data sf -j2; ok $? "the re-run completes" || show sf
is "$(digest sf)" "$ref" "... with the uninterrupted output"
is "$(stat -c %Y.%y sf/shards/000001/manifest.tsv)" "$kept" "... without repacking the pieces that were done"

ln -s "$TMP/nowhere.txt" bad/missing.txt
data mb INPUTS="$TMP/bad/missing.txt $TMP/corpus/part1.txt"
is "$?" 2 "a missing file: make fails"
grep -q "data-inputs.sh: $TMP/bad/missing.txt: no such file" mb.log; ok $? "... naming it" || show mb

data none INPUTS="$TMP/nothing*"
is "$?" 2 "a glob that matches nothing: make fails"
grep -q "data-inputs.sh: $TMP/nothing\*: no file matches" none.log; ok $? "... saying so" || show none

data 'pct%d'
is "$?" 2 "a folder W with '%' (a pattern to make): make fails"
grep -q "a folder name with '%' or ':'" 'pct%d.log' && [ ! -e "$TMP/pct%d" ] && [ ! -e "$TMP/pct000000d" ]
ok $? "... saying so, before it writes anything" || show 'pct%d'
done_testing
