#!/bin/bash
# tests/doc-cat.t: doc-cat on compressed inputs (gzip, zstd, xz: the same
# documents as the plain file, told by their first bytes, not their names)
# and when one of them goes wrong: a bad JSON line deep in a large gzip
# file is named by file and line and ends the run at once (the decompressor
# stopped, not read to its end), -o is left unwritten, and a corrupt or
# truncated file is named.  (The byte ranges and the plan: test_docs; the
# pipeline's inputs: data-pipeline.t.)  Streams (standard input, a pipe)
# are told by their first bytes too, at every length of plain text.
# bpe-encode and bpe-learn refuse a compressed FILE, pointing at doc-cat.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
for p in gzip zstd xz; do
	command -v $p > /dev/null || { echo "1..0 # SKIP $p is not installed (pipelines/deps.sh)"; exit 0; }
done
i=0
while [ $i -lt 300 ]; do
	printf '{"text":"document %d\\nline two"}\n' $i
	i=$((i + 1))
done > docs.jsonl
doc-cat -f jsonl docs.jsonl > plain.out
is "$(grep -o 'endoftext' plain.out | wc -l)" 300 "JSON Lines: 300 documents"
gzip -c docs.jsonl > a.gz; zstd -q -c docs.jsonl > a.zst; xz -c docs.jsonl > a.xz
cp a.zst renamed.txt
for f in a.gz a.zst a.xz renamed.txt; do
	doc-cat -f jsonl "$f" > c.out
	is "$(cmp c.out plain.out && echo same)" same "$f: the documents of the plain file"
done
for z in gzip zstd xz; do
	cat docs.jsonl | $z -c | doc-cat -f jsonl > c.out
	is "$(cmp c.out plain.out && echo same)" same "$z data on stdin"
done
doc-cat -f jsonl <(xz -c < docs.jsonl) > c.out
is "$(cmp c.out plain.out && echo same)" same "xz data through a named pipe"

# a bad line near the start of a file whose whole would take the
# decompressor a while: the run ends at the line, not after the stream
{ printf '{"text":"a"}\n{"txt":"b"}\n'; i=0; while [ $i -lt 20 ]; do cat docs.jsonl; i=$((i + 1)); done; } |
	gzip -1 > bad.gz
( ulimit -t 20; doc-cat -f jsonl -o out.txt bad.gz ) 2> err.txt
is "$?" 1 "a JSON line without text in a gzip file: exit 1"
is "$(cat err.txt)" 'doc-cat: bad.gz:2: no "text" member' "... naming the file and the line"
[ ! -e out.txt ] && [ -z "$(ls -A | grep '^out\.txt.')" ]
ok $? "... -o out.txt not written, no temporary left"

# corrupt and truncated compressed files
head -c 200 a.xz > cut.xz
# (the decompressor says why first; doc-cat's line names the file)
ours() { printf '%s\n' "$err" | grep '^doc-cat: '; }
run doc-cat -f jsonl cut.xz
is "$rc" 1 "a truncated xz file: exit 1"
case $(ours) in "doc-cat: cut.xz: corrupt or truncated xz data (xz -dc exited with 1), after "*) r=0 ;; *) r=1 ;; esac
ok $r "... named, with the text read before ($(ours))"
{ head -c 20 a.gz; head -c 300 /dev/zero; } > zeros.gz
run doc-cat -f jsonl zeros.gz
[ "$rc" = 1 ] && case $(ours) in "doc-cat: zeros.gz: corrupt or truncated gzip data"*) true ;; *) false ;; esac
ok $? "a gzip file with garbage after its header: exit 1, named ($(ours))"

# a stream is told by its first bytes too: standard input, a pipe
run sh -c 'cat cut.xz | doc-cat -f jsonl'
case $(ours) in "doc-cat: <stdin>: corrupt or truncated xz data"*) r=0 ;; *) r=1 ;; esac
ok $r "truncated xz data on stdin: named as <stdin> ($(ours))"
{ printf '{"text":"a"}\n{"txt":"b"}\n'; i=0; while [ $i -lt 20 ]; do cat docs.jsonl; i=$((i + 1)); done; } |
	zstd -q -1 > bad.zst
( ulimit -t 20; cat bad.zst | doc-cat -f jsonl -o out.txt ) 2> err.txt
is "$?:$(cat err.txt)" '1:doc-cat: <stdin>:2: no "text" member' \
	"a bad line in zstd data on stdin: exit 1 at the line, the decompressor and feeder stopped"
[ ! -e out.txt ]; ok $? "... -o out.txt not written"
printf 'a<|endoftext|>bb<|endoftext|>ccc<|endoftext|>' > three.txt
for n in 0 1 5 6 7; do  # shorter than, as long as and longer than the bytes that tell a codec
	head -c $n three.txt > short.txt
	is "$(cat short.txt | doc-cat | od -c)" "$(doc-cat short.txt | od -c)" \
		"plain text of $n bytes on stdin: as from the file"
done
is "$(doc-cat <(cat three.txt) | od -c)" "$(doc-cat three.txt | od -c)" "plain text through a named pipe"
run doc-cat -r 2:10 <(cat three.txt)
is "$rc" 2 "a byte range of a pipe: a usage error, not the whole stream ($err)"
# the programs that read FILEs as text refuse compressed ones (their
# compressed bytes would be encoded or learned from), pointing at doc-cat;
# piped in, such bytes are taken as they are
printf 'lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n' > bytes.bpe
i=0; while [ $i -lt 256 ]; do printf 't %d "\\x%02x"\n' $i $i >> bytes.bpe; i=$((i + 1)); done
echo end >> bytes.bpe
for prog in "bpe-encode -t bytes.bpe" "bpe-encode --pretokenize" "bpe-learn -v 300 -o tok.bpe"; do
	run $prog docs.jsonl a.zst
	[ "$rc" = 1 ] && case $err in "${prog%% *}: a.zst: zstd data, not text: give ${prog%% *} its text (doc-cat a.zst | ${prog%% *} ..."*) true ;; *) false ;; esac
	ok $? "$prog on a zstd FILE: exit 1, pointing at doc-cat ($err)"
done
[ ! -e tok.bpe ]; ok $? "... no tokenizer written"
cat a.gz | bpe-encode -t bytes.bpe > bytes.tok
ok $? "the same bytes piped in: encoded as they are"
run doc-cat missing.gz
is "$rc:$err" "1:doc-cat: missing.gz: No such file or directory" "a missing file: exit 1, named"
done_testing
