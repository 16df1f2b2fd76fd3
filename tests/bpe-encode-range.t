#!/bin/bash
# tests/bpe-encode-range.t: bpe-encode -r START:END FILE reads the documents
# of a byte range in place, and gives what doc-cat -r START:END FILE piped
# into it gives: ids and pre-tokens (with --counts-out) for every piece of a
# cut (cuts inside a separator, right after one, at the start and the end, a
# range past the last separator), a UTF-8 byte-order mark dropped, an empty
# range; bad input as doc-cat names it (a NUL byte and its offset, a UTF-16
# file), and what cannot be read in place (compressed, stdin, two files) a
# usage error.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
EOT='<|endoftext|>'

perl "$LMPIPE_ROOT/tests/mktext.pl" 4000 7 > base.txt
# documents of many sizes, the separator now and then at a line's end
perl -e 'open my $f, "<", "base.txt" or die; local $/; my $t = <$f>; my @w = split / /, $t;
	srand 5; my $i = 0; while ($i < @w) { my $n = 1 + int rand 300;
	print join(" ", @w[$i .. ($i + $n < @w ? $i + $n : $#w)]), ($n % 3 ? "" : "\n"), "<|endoftext|>";
	$i += $n + 1 } print "tail without a separator\n"' > docs.txt
bpe-learn -v 500 --special "$EOT" -o tok.bpe docs.txt 2> /dev/null
ok $? "a tokenizer"
size=$(stat -c %s docs.txt)

# every piece of three cuts: ids and pre-tokens as through doc-cat
bad=0 pieces=0
for piece in 997 4096 $((size / 3)); do
	doc-cat --plan "$piece" docs.txt > plan.tsv || bad=1
	while IFS=$'\t' read -r _ a b; do
		r=$a:${b#-}
		pieces=$((pieces + 1))
		doc-cat -r "$r" docs.txt | bpe-encode -t tok.bpe -j 2 > a.ids &&
			bpe-encode -t tok.bpe -j 2 -r "$r" docs.txt > b.ids && cmp -s a.ids b.ids || bad=1
		doc-cat -r "$r" docs.txt | bpe-encode --pretokenize --special "$EOT" --counts-out a.counts > a.pre &&
			bpe-encode --pretokenize --special "$EOT" --counts-out b.counts -r "$r" docs.txt > b.pre &&
			cmp -s a.pre b.pre && cmp -s a.counts b.counts || bad=1
	done < plan.tsv
done
[ $bad -eq 0 ] && [ $pieces -gt 50 ]
ok $? "every piece of three cuts ($pieces pieces): the ids, pre-tokens and counts of doc-cat -r | bpe-encode"

# ranges cut inside a separator, just after one, at 0 and at the end
at=$(grep -bo "$EOT" docs.txt | sed -n 5p | cut -d: -f1)
bad=0
for r in "$((at + 3)):$((at + 5000))" "$((at + 13)):$((at + 14))" "0:0" "0:" "$size:" "$((size - 5)):" "$((at + 3)):$((at + 4))"; do
	doc-cat -r "$r" docs.txt | bpe-encode -t tok.bpe > a.ids &&
		bpe-encode -t tok.bpe -r "$r" docs.txt > b.ids && cmp -s a.ids b.ids || { bad=1; echo "# range $r"; }
done
ok $bad "ranges inside a separator, right after one, empty, at the start and the end"

# a UTF-8 byte-order mark at the start is dropped, as doc-cat drops it
printf '\357\273\277' | cat - docs.txt > bom.txt
doc-cat -r 0:5000 bom.txt | bpe-encode -t tok.bpe > a.ids
bpe-encode -t tok.bpe -r 0:5000 bom.txt > b.ids
cmp -s a.ids b.ids
ok $? "a UTF-8 byte-order mark: dropped, as by doc-cat"
: > empty.txt
run bpe-encode -t tok.bpe -r 0: empty.txt
[ $rc -eq 0 ] && bpe-encode -t tok.bpe empty.txt | cmp -s - "$TMP/.out"
ok $? "an empty file: an empty stream (exit $rc)"

# bad input, named as doc-cat names it
{ head -c 3000 docs.txt; printf 'a\000b'; tail -c +3001 docs.txt; } > nul.txt
run bpe-encode -t tok.bpe -r 0: nul.txt
is "$rc $err" "1 bpe-encode: nul.txt: byte 3001: a NUL byte: binary data, not text" "a NUL byte: the file and its offset"
run bpe-encode -t tok.bpe -r 5000: nul.txt
[ $rc -eq 0 ]
ok $? "(a NUL byte outside the range is not read)"
printf '\377\376a\000b\000' > u16.txt
run bpe-encode -t tok.bpe -r 0: u16.txt
is "$rc $err" "1 bpe-encode: u16.txt: UTF-16 or UTF-32 text (byte-order mark FF FE): convert it to UTF-8 first (iconv -t UTF-8)" \
	"a UTF-16 file: named"
gzip -c docs.txt > docs.txt.gz
run bpe-encode -t tok.bpe -r 0:100 docs.txt.gz
is "$rc $err" "2 bpe-encode: docs.txt.gz: gzip data cannot be read by byte range" "a compressed file: a usage error"
run bpe-encode -t tok.bpe -r 0:100 docs.txt docs.txt
[ $rc -eq 2 ] && case $err in "bpe-encode: --range needs exactly one text FILE"*) true ;; *) false ;; esac
ok $? "two files: a usage error (exit $rc)" || echo "# $err"
run bpe-encode -t tok.bpe -r 0:100 < docs.txt
[ $rc -eq 2 ]
ok $? "stdin: a usage error (exit $rc)" || echo "# $err"
run bpe-encode -t tok.bpe -r 100:50 docs.txt
is "$rc $err" "2 bpe-encode: --range 100:50: the end is before the start" "an end before the start: a usage error"
run bpe-encode -t missing.bpe -r 5:x docs.txt
[ $rc -eq 2 ] && case $err in "bpe-encode: --range end"*) true ;; *) false ;; esac
ok $? "a bad range: a usage error, before the tokenizer is read (exit $rc)" || echo "# $err"
run bpe-encode -t tok.bpe -r $((size + 1)): docs.txt
[ $rc -eq 2 ] && case $err in "bpe-encode: docs.txt: range "*" outside its $size bytes") true ;; *) false ;; esac
ok $? "a range past the end: a usage error (exit $rc)" || echo "# $err"
run bpe-encode -t tok.bpe -r 0:100 missing.txt
[ $rc -eq 1 ] && case $err in "bpe-encode: missing.txt: "*) true ;; *) false ;; esac
ok $? "a missing file: named (exit $rc)" || echo "# $err"

done_testing
