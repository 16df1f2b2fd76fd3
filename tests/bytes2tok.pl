#!/usr/bin/env perl
# tests/bytes2tok.pl: a byte-level token stream (man 5 lmpipe-tokens) of
# stdin on stdout: each byte is one id, vocabulary 256; the newline (10)
# is the end-of-text id, so each line is a document.
use strict;
use warnings;
binmode STDIN;
binmode STDOUT;
local $/;
my @ids = unpack('C*', <STDIN> // '');
print "LMTS", pack('CCvVV', 1, 2, 16, 256, 10);
for (my $i = 0; $i < @ids; $i += 65536) {
	my $j = $i + 65535 < $#ids ? $i + 65535 : $#ids;
	print pack('V', $j - $i + 1), pack('v*', @ids[$i .. $j]);
}
print pack('V', 0);
