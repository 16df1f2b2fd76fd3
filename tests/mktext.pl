#!/usr/bin/env perl
# tests/mktext.pl N SEED: N sentences of a small English-like grammar on
# stdout (a fixed LCG, so the text depends only on SEED), for the learning
# test: structured enough that a tiny model can learn it, varied enough that
# the unigram entropy of its bytes is high.
use strict;
use warnings;
my ($n, $x) = @ARGV;
die "usage: mktext.pl N SEED\n" unless defined $x;
sub pick { $x = ($x * 1103515245 + 12345) % 2147483648; return $_[($x >> 8) % @_]; }
my @name = qw(Tom Lily Sam Mia Ben Sue Max Kim);
my @verb = qw(saw found liked painted carried lost wanted shared);
my @adj = qw(red big small happy old shiny soft green);
my @noun = qw(cat ball dog kite box tree boat cake);
my @place = ('in the park', 'at home', 'by the lake', 'in the garden', 'at school');
for (1 .. $n) {
	my $s = pick(@name) . ' ' . pick(@verb) . ' a ' . pick(@adj) . ' ' . pick(@noun) . ' '
		. pick(@place) . '.';
	$s .= ' ' . pick(@name) . ' was ' . pick(@adj) . '.' if pick(0, 1);
	print "$s\n";
}
