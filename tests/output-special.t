#!/bin/sh
# tests/output-special.t: -o onto a destination that is not a regular file
# (base/atomic.h): a FIFO or a character device is written in place.
# Written through a temporary file and renamed, it would be replaced by a
# regular file (as /dev/null once was, by a run as root with -o /dev/null).
# Only nodes in the test's own folder are written; the readers give up
# after 20 s, so that a replaced FIFO fails, not hangs.
. "$(dirname "$0")/lib.sh"
cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 400 1 > text.txt
bpe-learn -v 300 -o tok.bpe text.txt 2>/dev/null
ok $? "a tokenizer"
bpe-encode -t tok.bpe -o ids.tok text.txt
ok $? "bpe-encode -o a regular file"

mkfifo fifo
timeout 20 cat fifo > from-fifo &
reader=$!
timeout 20 bpe-encode -t tok.bpe -o fifo text.txt
ok $? "bpe-encode -o a FIFO"
wait $reader
[ -p fifo ]; ok $? "... the FIFO is still a FIFO"
cmp -s ids.tok from-fifo; ok $? "... and the reader got the same bytes as the file"
ls -A | grep -q '\.tmp-'; [ $? -ne 0 ]; ok $? "... no temporary file left"

# a character device: a /dev/null of our own, where mknod is allowed
# (root), so that a regression replaces this node and not the system's
if mknod null c 1 3 2>/dev/null; then
	bpe-encode -t tok.bpe -o null text.txt
	ok $? "bpe-encode -o a character device (/dev/null's numbers)"
	[ -c null ] && [ ! -s null ]; ok $? "... still the device"
else
	echo "ok $((_tap_n += 1)) # SKIP mknod not allowed here"
	echo "ok $((_tap_n += 1)) # SKIP mknod not allowed here"
fi

mkfifo fifo2
timeout 20 cat fifo2 > tok-fifo &
reader=$!
timeout 20 bpe-learn -v 300 -o fifo2 text.txt 2>/dev/null
ok $? "bpe-learn -o a FIFO"
wait $reader
[ -p fifo2 ] && cmp -s tok.bpe tok-fifo; ok $? "... a FIFO still, holding the tokenizer"
done_testing
