#!/usr/bin/env perl
# tests/mktok.pl: write a token stream (man 5 lmpipe-tokens) on stdout for
# the tests, in blocks of 65536 ids as the library's writer makes them.
#   mktok.pl VOCAB EOT arange N        ids 0 .. N-1 (mod VOCAB)
#   mktok.pl VOCAB EOT docs N MAXLEN S N documents of 1..MAXLEN ids, each
#                                      ending in EOT (a fixed LCG, seed S)
#   mktok.pl VOCAB EOT list ID...      the given ids
# EOT may be "none".  Document d's ids encode d (d * 7 + i mod the vocabulary,
# never EOT) so a test can tell documents apart.
use strict;
use warnings;

my ($vocab, $eot, $mode, @a) = @ARGV;
die "usage: mktok.pl VOCAB EOT arange|docs|list ...\n" unless defined $mode;
$eot = $eot eq 'none' ? 0xFFFFFFFF : $eot;
my $dt = $vocab <= 65536 ? 2 : 4;
my @ids;
if ($mode eq 'arange') {
	@ids = map { $_ % $vocab } 0 .. $a[0] - 1;
} elsif ($mode eq 'list') {
	@ids = @a;
} elsif ($mode eq 'docs') {
	my ($n, $maxlen, $x) = @a;
	for my $d (0 .. $n - 1) {
		$x = ($x * 1103515245 + 12345) % 2147483648;
		my $len = 1 + ($x >> 8) % $maxlen;
		for my $i (0 .. $len - 2) {
			my $id = ($d * 7 + $i) % $vocab;
			$id = ($id + 1) % $vocab if $id == $eot;
			push @ids, $id;
		}
		push @ids, $eot;
	}
} else {
	die "mktok.pl: unknown mode $mode\n";
}
binmode STDOUT;
print "LMTS", pack('CCvVV', 1, $dt, 16, $vocab, $eot);
my $fmt = $dt == 2 ? 'v*' : 'V*';
for (my $i = 0; $i < @ids; $i += 65536) {
	my $j = $i + 65535 < $#ids ? $i + 65535 : $#ids;
	print pack('V', $j - $i + 1), pack($fmt, @ids[$i .. $j]);
}
print pack('V', 0);
