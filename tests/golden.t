#!/usr/bin/env perl
# tests/golden.t: golden CLI tests.  Each tests/golden/*.txt holds cases:
#
#   $ command line (run by sh, bin/ first on PATH, in a scratch directory
#                   shared by the cases of one file, in order)
#   > an expected stdout line          (all of stdout must match, in order)
#   2> an expected stderr line         (all of stderr must match, in order)
#   ? expected exit code               (default 0)
#
# Lines starting with '#' and blank lines separate nothing and are ignored.
# "$DATA" in a command is ../shared/data; a case whose command uses it is
# skipped when that folder is absent.
use strict;
use warnings;
use File::Temp qw(tempdir);

my $root = $ENV{LMPIPE_ROOT} // '.';
my $bin  = $ENV{LMPIPE_BIN}  // "$root/bin";
my $data = $ENV{LMPIPE_DATA} // "$root/../shared/data";
$ENV{PATH} = "$bin:$ENV{PATH}";
$ENV{DATA} = $data;
$ENV{ROOT} = $root;
my $have_data = -r "$data/README.md";

my @cases;
for my $f (sort glob("$root/tests/golden/*.txt")) {
	open my $fh, '<', $f or die "$f: $!";
	my $c;
	while (my $l = <$fh>) {
		chomp $l;
		next if $l =~ /^#/ || $l =~ /^\s*$/;
		if ($l =~ /^\$ (.*)$/) {
			$c = { file => $f, line => $., cmd => $1, out => [], err => [], rc => 0 };
			push @cases, $c;
		} elsif (!$c) {
			die "$f:$.: expected a '\$ command' line first\n";
		} elsif ($l =~ /^> ?(.*)$/) {
			push @{$c->{out}}, $1;
		} elsif ($l =~ /^2> ?(.*)$/) {
			push @{$c->{err}}, $1;
		} elsif ($l =~ /^\? (\d+)$/) {
			$c->{rc} = $1;
		} else {
			die "$f:$.: cannot parse '$l'\n";
		}
	}
}

my $n = 0;
my %dirs;
for my $c (@cases) {
	$n++;
	# The cases of one file share a scratch directory (a case may use what
	# an earlier one wrote); each file starts in an empty one.
	$dirs{$c->{file}} //= tempdir(CLEANUP => 1);
	my $dir = $dirs{$c->{file}};
	(my $name = $c->{file}) =~ s{.*/}{};
	$name .= ":$c->{line}: $c->{cmd}";
	if ($c->{cmd} =~ /\$DATA/ && !$have_data) {
		print "ok $n # SKIP needs ../shared/data: $name\n";
		next;
	}
	my $pid = open(my $ph, '-|') // die "fork: $!";
	if (!$pid) {
		chdir $dir or die;
		open STDERR, '>', "$dir/.err" or die;
		open STDIN, '<', '/dev/null' or die;
		exec '/bin/sh', '-c', $c->{cmd};
	}
	my @out = <$ph>;
	close $ph;
	my $rc = $? >> 8;
	$rc = 128 + ($? & 127) if $? & 127;
	open my $eh, '<', "$dir/.err" or die;
	my @err = <$eh>;
	close $eh;
	chomp(@out, @err);
	my @why;
	push @why, "exit code $rc, want $c->{rc}" if $rc != $c->{rc};
	push @why, "stdout differs:\n" . join("", map { "#   got:  $_\n" } @out)
		. join("", map { "#   want: $_\n" } @{$c->{out}})
		if join("\n", @out) ne join("\n", @{$c->{out}});
	push @why, "stderr differs:\n" . join("", map { "#   got:  $_\n" } @err)
		. join("", map { "#   want: $_\n" } @{$c->{err}})
		if join("\n", @err) ne join("\n", @{$c->{err}});
	if (@why) {
		print "not ok $n - $name\n";
		print "# $_\n" for @why;
	} else {
		print "ok $n - $name\n";
	}
}
print "1..$n\n";
