#!/bin/sh
# tests/bpe-stream.t: bpe-encode streams with bounded memory (a few hundred
# MB through a small address-space limit) and merges giant pre-tokens in
# about linear time (a quadratic merge would not finish inside the timeout).
. "$(dirname "$0")/lib.sh"

# a small byte-level tokenizer: 256 bytes and merges for letters, doubling
# runs of "a" and building the emoji U+1F643
{
	printf 'lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 268\nspecials 1\nmerges 11\n'
	i=0
	while [ $i -lt 256 ]; do printf 't %d "\\x%02x"\n' $i $i; i=$((i + 1)); done
	printf 't 256 "aa"\nt 257 "aaaa"\nt 258 "aaaaaaaa"\nt 259 "\\xf0\\x9f"\nt 260 "\\xf0\\x9f\\x99"\n'
	printf 't 261 "\xf0\x9f\x99\x83"\nt 262 "\xf0\x9f\x99\x83\xf0\x9f\x99\x83"\nt 263 "Th"\n'
	printf 't 264 "The"\nt 265 " q"\nt 266 "ck"\nt 267 "<|endoftext|>"\ns 267\n'
	printf 'm "a" "a"\nm "aa" "aa"\nm "aaaa" "aaaa"\nm "\\xf0" "\\x9f"\nm "\\xf0\\x9f" "\\x99"\n'
	printf 'm "\xf0\x9f\x99" "\\x83"\nm "\xf0\x9f\x99\x83" "\xf0\x9f\x99\x83"\nm "T" "h"\nm "Th" "e"\n'
	printf 'm " " "q"\nm "c" "k"\nend\n'
} >"$TMP/small.tok"
tok="-t $TMP/small.tok"
bpe-encode $tok </dev/null >/dev/null
ok $? "hand-made tokenizer loads"

printf 'The quick brown fox 123, jumps! <|endoftext|> aaaa \360\237\231\203\n' >"$TMP/line"
if [ "${LMPIPE_SANITIZE:-0}" = 1 ]; then
	lines=300000 limit=   # ASan reserves a huge address space: no ulimit
else
	lines=5000000 limit=300000  # 280 MB of text under 300 MB of address space
fi
total=$(($(wc -c <"$TMP/line") * lines))
got=$(perl -e 'my $l = <STDIN>; print $l x 10000 for 1 .. $ARGV[0] / 10000' $lines <"$TMP/line" |
	( [ -n "$limit" ] && ulimit -v $limit; bpe-encode $tok -j 2 ) |
	bpe-decode $tok | wc -c)
is "$got" "$total" "$total bytes streamed through bpe-encode ${limit:+under ulimit -v $limit KB} and back"

for kind in a emoji; do
	size=4
	[ "${LMPIPE_SANITIZE:-0}" = 1 ] && size=1
	if [ $kind = a ]; then
		perl -e 'print "a" x ($ARGV[0] * 1000000)' $size >"$TMP/giant"
	else
		perl -e 'print "\xf0\x9f\x99\x83" x ($ARGV[0] * 250000)' $size >"$TMP/giant"
	fi
	timeout 60 bpe-encode $tok -j 1 --text "$TMP/giant" >"$TMP/ids"
	ok $? "one $size MB pre-token of $kind finishes in time"
	is "$(tr ' ' '\n' <"$TMP/ids" | sort -u | tr '\n' ' ')" "$([ $kind = a ] && echo 258 || echo 262) " \
		"it merges all the way up"
	bpe-decode $tok --text "$TMP/ids" | cmp -s - "$TMP/giant"
	ok $? "and decodes back"
done
done_testing
