#!/usr/bin/env perl
# tests/tokdocs.pl: print the documents of a token stream (man 5
# lmpipe-tokens) on stdin, one line of space-separated ids per document
# (a document ends with the end-of-text id).  No checking: the library
# does that; this is an independent reading for the tests.
use strict;
use warnings;

binmode STDIN;
local $/;
my $s = <STDIN>;
my ($magic, $ver, $dt, $hlen, $vocab, $eot) = unpack('a4CCvVV', $s);
die "tokdocs.pl: not a token stream\n" unless $magic eq 'LMTS';
my $pos = $hlen;
my @doc;
for (;;) {
	my $n = unpack('V', substr($s, $pos, 4));
	$pos += 4;
	if ($n == 0) {
		last if $pos >= length $s;
		$pos += unpack('v', substr($s, $pos + 6, 2));
		next;
	}
	for my $id (unpack($dt == 2 ? "v$n" : "V$n", substr($s, $pos, $n * $dt))) {
		push @doc, $id;
		if ($id == $eot) {
			print "@doc\n";
			@doc = ();
		}
	}
	$pos += $n * $dt;
}
print "@doc\n" if @doc;
