#!/bin/bash
# tests/bpe-pretok.t: bpe-encode --pretokenize then --from-pretok gives the
# ids bpe-encode gives on the text (special tokens, two specials that share a
# first byte, a special cut by a chunk boundary, pre-tokens of 1 byte, of more
# than 64 bytes and of more than 64 KiB, UTF-8, CRLF, an empty text; 5000
# distinct long words alike in their first bytes), at small chunks too; --counts-out writes bpe-learn --counts-out's bytes; a
# damaged or truncated file, other special tokens and bad options are named.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
EOT='<|endoftext|>'

perl "$LMPIPE_ROOT/tests/mktext.pl" 3000 5 > base.txt
{
	cat base.txt
	printf '%s%s<|end|>x<|end|>%s\n' "$EOT" "$EOT" "$EOT"
	printf 'caf\303\251 na\303\257ve \342\202\254 100 \360\237\231\203\r\nit'"'"'s  a   b\t\tc\n'
	perl -e 'print " " x 100, "x" x 100, "\n", "ab" x 40000, "\n", "1" x 70, "z"'
} > text.txt
bpe-learn -v 600 --special "$EOT" --special '<|end|>' -o tok.bpe text.txt 2> /dev/null
ok $? "a tokenizer with two special tokens"
T=(-t tok.bpe --special "$EOT" --special '<|end|>')

same() { # same NAME TEXTFILE [PRETOKENIZE OPTION]...: --from-pretok equals the direct ids
	local name=$1 f=$2; shift 2
	bpe-encode -t tok.bpe -j 1 "$f" > direct.ids &&
		bpe-encode --pretokenize --special "$EOT" --special '<|end|>' "$@" -o p.pre "$f" &&
		bpe-encode -t tok.bpe --from-pretok p.pre > pre.ids && cmp -s direct.ids pre.ids
	ok $? "$name: the same ids through the pre-tokens"
}
same "mixed text" text.txt
bpe-encode -t tok.bpe -j 3 text.txt | cmp -s - direct.ids
ok $? "(the direct ids do not depend on threads: the reference is sound)"
same "mixed text, 64-byte chunks" text.txt --chunk 64
same "mixed text, 1000-byte chunks" text.txt --chunk 1000
: > empty.txt
same "an empty text" empty.txt
printf '%s' "$EOT" > only.txt
same "a special token alone" only.txt
# many distinct pre-tokens (the word table grows past its first 4096 slots)
# and long ones that recur, alike in their first 8 bytes and length and
# different after (the table tells them by all their bytes)
perl -e 'srand(7); my @w = map { my ($i, $t) = ($_, ""); for (1 .. 4) { $t .= chr(97 + $i % 26); $i = int($i / 26) }
	" abcdefgh$t" } 0 .. 4999; my %seen;
	print join("", map { my $x = $w[int(rand(5000))]; $seen{$x} = 1; $x } 1 .. 30000), "\n";
	print STDERR scalar(keys %seen) + 1, "\n"' > many.txt 2> many.distinct
same "5000 distinct long words, each recurring" many.txt
# the trailer's number of pre-tokens (a u64, 16 bytes from the end)
is "$(tail -c 16 p.pre | head -c 8 | od -An -t u8 | tr -d ' ')" "$(cat many.distinct)" \
	"... each distinct pre-token stored once (the words and the newline)"
bpe-encode --pretokenize --special "$EOT" --special '<|end|>' --counts-out m1.counts many.txt > /dev/null
bpe-learn --special "$EOT" --special '<|end|>' -j 1 --counts-out m2.counts many.txt 2> /dev/null
cmp -s m1.counts m2.counts
ok $? "... and their counts: bpe-learn --counts-out's bytes"

# stdin and stdout, and the counts
bpe-encode --pretokenize --special "$EOT" --special '<|end|>' -o p.pre text.txt
bpe-encode --pretokenize --special "$EOT" --special '<|end|>' --counts-out a.counts < text.txt > p2.pre
cmp -s p.pre p2.pre
ok $? "stdin to stdout gives the same file as FILE to -o"
bpe-learn --special "$EOT" --special '<|end|>' -j 1 --counts-out b.counts text.txt 2> /dev/null
cmp -s a.counts b.counts
ok $? "--counts-out: the bytes of bpe-learn --counts-out"

# bad files
size=$(stat -c %s p.pre)
cp p.pre bad.pre && printf 'X' | dd of=bad.pre bs=1 seek=40 conv=notrunc 2> /dev/null
run bpe-encode -t tok.bpe --from-pretok -o x.ids bad.pre
[ $rc -eq 1 ] && [ "$err" = "bpe-encode: bad.pre: checksum mismatch (a damaged or truncated file)" ]
ok $? "a damaged file is named (exit $rc)" || echo "# $err"
head -c $((size - 7)) p.pre > short.pre
run bpe-encode -t tok.bpe --from-pretok -o x.ids short.pre
[ $rc -eq 1 ] && case $err in "bpe-encode: short.pre: "*) true ;; *) false ;; esac
ok $? "a truncated file is named (exit $rc)" || echo "# $err"
head -c 20 text.txt > notpre.pre
run bpe-encode -t tok.bpe --from-pretok -o x.ids notpre.pre
[ $rc -eq 1 ] && [ "$err" = "bpe-encode: notpre.pre: not a pre-token file (man 5 lmpipe-pretok)" ]
ok $? "a text is not taken for a pre-token file" || echo "# $err"
bpe-encode --pretokenize --special "$EOT" -o one.pre text.txt
run bpe-encode -t tok.bpe --from-pretok -o x.ids one.pre
[ $rc -eq 1 ] && [ "$err" = "bpe-encode: one.pre: made with 1 special tokens, the tokenizer has 2" ]
ok $? "other special tokens are refused (exit $rc)" || echo "# $err"
run bpe-encode --pretokenize --text -o x.pre text.txt
is "$rc" 2 "--pretokenize with --text: a usage error"
run bpe-encode "${T[@]}" --counts-out x.counts text.txt
is "$rc" 2 "--counts-out without --pretokenize: a usage error"
run bpe-encode "${T[@]}" --from-pretok
is "$rc" 2 "--from-pretok without FILEs: a usage error"
[ ! -e x.ids ]
ok $? "no output is left by the failed runs"
done_testing
