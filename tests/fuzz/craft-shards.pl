# tests/fuzz/craft-shards.pl DIR: write the crafted shards of issue 22 items 1
# and 2 (valid checksums, claims that wrap 64-bit sizes) into DIR:
# wrap-index.lms (2^62 + 3 frames of 1 token) and wrap-tokens.lms (2^64 - 1
# tokens in 0 frames).  Their output is committed in tests/fuzz/shard/.
use strict; use warnings;
my @T; for my $i (0..255) { my $c = $i; for (1..8) { $c = $c & 1 ? ($c >> 1) ^ 0x82F63B78 : $c >> 1 } $T[$i] = $c }
sub crc { my $c = 0xFFFFFFFF; $c = $T[($c ^ $_) & 0xFF] ^ ($c >> 8) for unpack 'C*', $_[0]; return $c ^ 0xFFFFFFFF }
die "crc" unless crc("123456789") == 0xE3069283;
sub shard { my ($F, $ntok, $nframes, $ioff, $body, $index) = @_;
	my $h = "LMSH" . pack('v v C x3 V V V Q< Q< Q< Q< V', 1, 64, 2, 1000, 0xFFFFFFFF, $F, $ntok, 0, $nframes, $ioff, crc($index));
	$h .= pack('V', crc($h)); return $h . $body . $index }
my $body = "\0\0\0"; my $idx = join '', map { pack('Q< V V', 64 + $_, 1, crc("\0")) } 0..2;
open my $f, '>:raw', $ARGV[0] . '/wrap-index.lms'; print $f shard(1, (1 << 62) + 3, (1 << 62) + 3, 67, $body, $idx); close $f;
open $f, '>:raw', $ARGV[0] . '/wrap-tokens.lms'; print $f shard(2, 18446744073709551615, 0, 64, '', ''); close $f;
