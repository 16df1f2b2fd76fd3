#!/usr/bin/env bash
# tests/bpe-learn.t: bpe-learn end to end: thread counts and counting in
# pieces give the same tokenizer, bad input fails cleanly with no output
# file, arbitrary bytes work, counts files merged on threads are the same
# bytes at any -j and the counts of the whole text, and a stream much larger
# than the memory the process may use is learned (streaming).
. "$(dirname "$0")/lib.sh"
set -e
cd "$TMP"
EOT='<|endoftext|>'

# A multilingual text with documents separated by the special token.
gen_text() { # gen_text REPS
	local i
	for i in $(seq 1 "$1"); do
		printf 'Doc %d: The quick brown fox (number %d) jumps; it'"'"'s 10:45 now.\r\n' "$i" $((i * 7919 % 1000))
		printf 'Ça va? Быстрая лиса %d прыгает. 敏捷的狐狸 ٣٤٥ ५६७ ⅫⅫ ½ 😀👍🏽\t\t end  \n' "$i"
		printf '%s' "$EOT"
	done
}
gen_text 400 > text.txt
gen_text 150 > half1.txt
gen_text 400 | tail -c +$(($(wc -c < half1.txt) + 1)) > half2.txt
cat half1.txt half2.txt | cmp -s - text.txt; ok $? "the two halves make the text"

run bpe-learn -j1 -v 600 --special "$EOT" -o j1.tok text.txt
is "$rc" 0 "-j1 learns"
run bpe-learn -j2 -v 600 --special "$EOT" -o j2.tok --gpt2-out g2 text.txt
is "$rc" 0 "-j2 learns"
cmp -s j1.tok j2.tok; ok $? "-j1 and -j2 give the same tokenizer"
is "$(grep -c '^m ' j1.tok)" 343 "600 ids = 1 special + 256 bytes + 343 merges"
is "$(sed -n 's/^t 0 //p' j1.tok)" "\"$EOT\"" "the special token is id 0"
ok $([ -s g2/vocab.json ] && [ -s g2/merges.txt ]; echo $?) "--gpt2-out writes vocab.json and merges.txt"
is "$(grep -v '^#' g2/merges.txt | wc -l)" 343 "merges.txt has every merge"
run bpe-learn -j2 -v 600 --special "$EOT" -o stdin.tok < text.txt
cmp -s j1.tok stdin.tok; ok $? "stdin gives the same tokenizer"

if command -v bpe-encode >/dev/null && command -v bpe-decode >/dev/null; then
	bpe-encode -t j1.tok text.txt | bpe-decode -t j1.tok | cmp -s - text.txt
	ok $? "the learned tokenizer loads in bpe-encode and round-trips the text"
fi

run bpe-learn -j2 --special "$EOT" --counts-out h1.counts half1.txt
is "$rc" 0 "count the first half"
run bpe-learn -j1 --special "$EOT" --counts-out h2.counts half2.txt
is "$rc" 0 "count the second half"
run bpe-learn --from-counts -v 600 --special "$EOT" -o pieces.tok h1.counts h2.counts
is "$rc" 0 "learn from both counts files"
cmp -s j1.tok pieces.tok; ok $? "counting in pieces gives the same tokenizer as one run"
run bpe-learn --from-counts -v 600 -o other.tok h1.counts
is "$rc" 1 "counts made with other specials are refused"
ok $([ ! -e other.tok ]; echo $?) "... and no output file"
is "$err" "bpe-learn: h1.counts: counted with other special tokens than given (1 in the file)" "... with a message"

# Counts files merged on threads by hash partition (bpe_counts_load_many):
# five pieces of ~10000 distinct pre-tokens each, enough to spread over
# every partition; the merged counts are the same bytes at -j 1, 2 and 3,
# hold what counting the whole text at once does (compared as sorted lists,
# through a reader written here), and give its tokenizer.
for s in 1 2 3 4 5; do
	perl -e 'srand($ARGV[0]); for (1 .. 20000) { print " ", join("", map { chr(97 + int rand 26) } 1 .. 2 + int rand 5);
		print "\n" if $_ % 12 == 0; print "<|endoftext|>" if $_ % 700 == 0 } print "<|endoftext|>"' $s > many$s.txt
	bpe-learn -j1 --special "$EOT" --counts-out many$s.counts many$s.txt
done
cat many?.txt > many.txt
bpe-learn -j2 --special "$EOT" --counts-out whole.counts many.txt
dump_counts() { # the entries of a counts file, "HEX COUNT" a line, sorted
	perl -e 'local $/; my $b = <STDIN>; my $p = unpack("V", substr($b, 12, 4));
		my $n = unpack("Q<", substr($b, $p, 8)); $p += 8;
		for (1 .. $n) { my ($l, $c) = unpack("V Q<", substr($b, $p, 12)); $p += 12;
			print unpack("H*", substr($b, $p, $l)), " $c\n"; $p += $l }' < "$1" | LC_ALL=C sort
}
for j in 1 2 3; do
	bpe-learn -j$j --special "$EOT" --from-counts --counts-out merged$j.counts many?.counts
done
cmp -s merged1.counts merged2.counts && cmp -s merged1.counts merged3.counts
ok $? "counts merged by partition: the same bytes at -j 1, 2 and 3"
distinct=$(dump_counts whole.counts | wc -l)
[ "$distinct" -gt 20000 ] && [ "$(dump_counts merged3.counts)" = "$(dump_counts whole.counts)" ]
ok $? "... the counts of the whole text, every one of its $distinct pre-tokens"
rc=0; cmp -s merged1.counts many1.counts || rc=$?
is "$rc" 1 "... (and not merely the first piece's)"
bpe-learn -j1 -v 700 --special "$EOT" -o many.tok many.txt
for j in 1 3; do
	bpe-learn -j$j -v 700 --special "$EOT" --from-counts -o many$j.tok many?.counts
	cmp -s many.tok many$j.tok; ok $? "-j $j: the tokenizer of the whole text"
done

# bad input: message, exit code, no output file
no_file() { [ ! -e "$1" ] && [ -z "$(ls -A . | grep '\.tmp-' || true)" ]; }
run bpe-learn -v 600 -o empty.tok /dev/null
is "$rc" 1 "empty input: exit 1"
is "$err" "bpe-learn: /dev/null: no text to learn from (empty, or only special tokens)" "empty input: message"
no_file empty.tok; ok $? "empty input: no output file"
printf '%s%s' "$EOT" "$EOT" > only-special.txt
run bpe-learn -v 600 --special "$EOT" -o os.tok only-special.txt
is "$rc" 1 "only special tokens: exit 1"
run bpe-learn -v 256 --special "$EOT" -o small.tok text.txt
is "$rc" 2 "vocab below 256 + specials: exit 2"
is "$err" "bpe-learn: --vocab-size 256 is below 256 bytes + 1 special tokens" "vocab too small: message"
no_file small.tok; ok $? "vocab too small: no output file"
run bpe-learn -v 600 -o nofile.tok does-not-exist.txt
is "$rc" 1 "unreadable file: exit 1"
case "$err" in *does-not-exist.txt*) ok 0 "unreadable file: message names it";; *) ok 1 "unreadable file: message names it: $err";; esac
no_file nofile.tok; ok $? "unreadable file: no output file"
run bpe-learn -v 600 --special '' -o es.tok text.txt
is "$rc" 2 "empty special token: exit 2"
no_file es.tok; ok $? "empty special token: no output file"
run bpe-learn -v 600 text.txt
is "$rc" 2 "no output named: exit 2"

# arbitrary bytes: invalid UTF-8, NUL, every byte value
perl -e 'srand(7); print map { chr(int(rand(256))) } 1 .. 200000' > bytes.bin
printf 'a\0b\0\0c\xff\xfe \xc3' >> bytes.bin
run bpe-learn -j2 -v 400 -o bytes.tok bytes.bin
is "$rc" 0 "random bytes learn"
is "$(sed -n 's/^tokens //p' bytes.tok)" 400 "random bytes: 400 ids"
run bpe-learn -j1 -v 400 -o bytes1.tok bytes.bin
cmp -s bytes.tok bytes1.tok; ok $? "random bytes: -j1 equals -j2"

# streaming: a piped input several times larger than the address space allowed
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then
	ok 0 "# SKIP memory limit under ASan (it reserves a huge shadow)"
else
	limit_kb=50000 big_mb=150
	set +e
	( ulimit -v $limit_kb
	  yes "The quick brown fox $EOT jumps over the lazy dog, 42 times; naïve café." |
		head -c ${big_mb}000000 | MALLOC_ARENA_MAX=2 bpe-learn -j2 -v 300 --special "$EOT" -o big.tok )
	rc=$?
	set -e
	is "$rc" 0 "${big_mb} MB piped through with ulimit -v ${limit_kb} KB"
	is "$(sed -n 's/^tokens //p' big.tok 2>/dev/null)" 300 "streamed input gives 300 ids"
fi
done_testing
