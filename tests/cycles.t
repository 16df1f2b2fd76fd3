#!/usr/bin/env perl
# cycles.t: no two source files of libcommon/ or kernels/ call each other,
# directly or round a longer loop (issue 14: rl_update.c <-> rl_update_ppo.c
# and model_decode.c <-> model_decode_cpu.c were such loops).  The call
# graph comes from the built objects' symbols (nm): file A calls file B when
# A's object needs a symbol B's object defines.  Then the same search on a
# planted graph, to show that it finds a loop.
use strict;
use warnings;
use File::Basename qw(dirname);

my $root = $ENV{LMPIPE_ROOT} // dirname(__FILE__) . '/..';
my $build = $ENV{LMPIPE_BUILD} // "$root/build";
my $n = 0;
sub ok_ { my ($c, $m) = @_; $n++; print(($c ? '' : 'not '), "ok $n - $m\n"); }

# Loops that are meant: each set of objects (under the build folder) may
# form one, and why.
my @allowed = (
	# backend.c opens the backend a device names; each backend reports its
	# errors through backend.c's sticky error (the op table, model/)
	[qw(libcommon/model/backend.o libcommon/model/backend_cpu.o libcommon/model/backend_cuda.o)],
);

# Strongly connected sets of more than one node in graph (node => [nodes]).
sub loops {
	my ($g) = @_;
	my (%idx, %low, %on, @stack, @out);
	my $i = 0;
	my $visit;
	$visit = sub {
		my ($v) = @_;
		$idx{$v} = $low{$v} = $i++;
		push @stack, $v;
		$on{$v} = 1;
		for my $w (@{ $g->{$v} // [] }) {
			if (!defined $idx{$w}) {
				$visit->($w);
				$low{$v} = $low{$w} if $low{$w} < $low{$v};
			} elsif ($on{$w}) {
				$low{$v} = $idx{$w} if $idx{$w} < $low{$v};
			}
		}
		return if $low{$v} != $idx{$v};
		my @set;
		while (1) {
			my $w = pop @stack;
			delete $on{$w};
			push @set, $w;
			last if $w eq $v;
		}
		push @out, [sort @set] if @set > 1;
	};
	for my $v (sort keys %$g) {
		$visit->($v) unless defined $idx{$v};
	}
	return @out;
}

sub allowed {
	my ($set) = @_;
	for my $a (@allowed) {
		my %in = map { $_ => 1 } @$a;
		return 1 unless grep { !$in{$_} } @$set;
	}
	return 0;
}

my @objs = map { glob("$build/$_") } qw(libcommon/*/*.o kernels/*.o kernels/cpu/*.o);
if (!@objs || system('nm --version >/dev/null 2>&1') != 0) {
	print "1..0 # SKIP ", (@objs ? 'no nm' : "no objects in $build (build first)"), "\n";
	exit 0;
}
my (%def, %need);
for my $o (@objs) {
	my $rel = substr($o, length($build) + 1);
	open my $nm, '-|', 'nm', $o or die "nm $o: $!";
	while (<$nm>) {
		if (/^[0-9a-f]+ [TDBRi] (\S+)$/) { $def{$1} //= $rel; }
		elsif (/^\s+U (\S+)$/) { push @{ $need{$rel} }, $1; }
	}
	close $nm;
}
my %g;
for my $o (keys %need) {
	my %to = map { $_ => 1 } grep { defined && $_ ne $o } map { $def{$_} } @{ $need{$o} };
	$g{$o} = [sort keys %to];
}
my @bad = grep { !allowed($_) } loops(\%g);
ok_(!@bad, sprintf('no call loop between the files of libcommon/ and kernels/ (%d objects)',
		   scalar @objs));
print "# loop: @$_\n" for @bad;

my %planted = (a => ['b'], b => ['c'], c => ['a'], d => ['a'], e => ['e']);
my @found = loops(\%planted);
ok_(@found == 1 && "@{ $found[0] }" eq 'a b c', 'a planted loop of three files is found, and only it');
ok_(!loops({ a => ['b'], b => ['c'] }), 'a chain is no loop');
ok_(allowed([qw(libcommon/model/backend.o libcommon/model/backend_cpu.o)]),
    'a part of an allowed loop is allowed');
ok_(!allowed([qw(libcommon/app/rl_update.o libcommon/app/rl_update_ppo.o)]),
    'the loop issue 14 broke is not');
print "1..$n\n";
