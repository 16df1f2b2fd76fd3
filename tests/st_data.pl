#!/usr/bin/env perl
# tests/st_data.pl FILE: the MD5 and length of a safetensors file's tensor
# data (what follows the header), so that two checkpoints with the same
# tensors compare equal whatever their metadata says (world, batch).
use strict;
use warnings;
use Digest::MD5;
open my $f, '<:raw', $ARGV[0] or die "st_data.pl: $ARGV[0]: $!\n";
read($f, my $h, 8) == 8 or die "st_data.pl: $ARGV[0]: no header\n";
seek $f, 8 + unpack('Q<', $h), 0 or die "st_data.pl: $ARGV[0]: $!\n";
my $md5 = Digest::MD5->new;
$md5->addfile($f);
print $md5->hexdigest, ' ', (-s $ARGV[0]) - 8 - unpack('Q<', $h), "\n";
