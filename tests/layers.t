#!/usr/bin/env perl
# layers.t: the include graph of libcommon/, kernels/ and tools/ against the
# allowed graph written once in libcommon/README.md (between the "layers"
# markers).  Then the same check on a planted tree, to show that it fails
# on each kind of forbidden include.
use strict;
use warnings;
use File::Temp qw(tempdir);
use File::Path qw(make_path);
use File::Basename qw(dirname basename);

my $root = $ENV{LMPIPE_ROOT} // dirname(__FILE__) . '/..';
my $n = 0;
sub ok_ { my ($c, $m) = @_; $n++; print(($c ? '' : 'not '), "ok $n - $m\n"); }

# part => { allowed part => 1 }, from the table in libcommon/README.md.
sub read_layers {
	my ($readme) = @_;
	open my $f, '<', $readme or die "$readme: $!";
	my ($in, %g) = (0);
	while (<$f>) {
		$in = 1, next if /<!-- layers: begin -->/;
		last if /<!-- layers: end -->/;
		next unless $in && /^\s+(\w+)\s*:\s*(.*?)\s*$/;
		$g{$1} = { map { $_ => 1 } split ' ', $2 };
	}
	return \%g;
}

sub files_under {
	my ($dir, $re) = @_;
	return () unless -d $dir;
	my @out;
	opendir my $d, $dir or return ();
	for my $e (sort grep { !/^\./ } readdir $d) {
		my $p = "$dir/$e";
		push @out, -d $p ? files_under($p, $re) : ($p =~ $re ? $p : ());
	}
	return @out;
}

# Every forbidden include under $top, as "file: reason" strings.
sub violations {
	my ($top) = @_;
	my $g = read_layers("$top/libcommon/README.md");
	my @bad;
	my %parts = map { basename($_) => 1 } grep { -d } glob("$top/libcommon/*");
	for my $p (sort keys %parts) {
		push @bad, "libcommon/$p: a folder the layer table does not list" unless $g->{$p};
	}
	for my $f (glob("$top/libcommon/*.[ch]")) {
		push @bad, "${\ substr($f, length($top) + 1)}: a source file at the root of libcommon/";
	}
	my @src = (files_under("$top/libcommon", qr/\.(c|h)$/),
		   files_under("$top/kernels", qr/\.(c|h|cu|cuh)$/),
		   files_under("$top/tools", qr/\.c$/));
	for my $path (@src) {
		my $rel = substr($path, length($top) + 1);
		my ($from, $prog, $tool);
		if ($rel =~ m{^libcommon/(\w+)/}) { $from = $1; }
		elsif ($rel =~ m{^kernels/}) { $from = 'kernels'; }
		elsif ($rel =~ m{^tools/([\w-]+)\.c$}) { $from = 'tools'; $tool = $1; ($prog = $1) =~ tr/-/_/; }
		my $allow = $g->{$from} or next;
		open my $fh, '<', $path or die "$path: $!";
		while (my $line = <$fh>) {
			next unless $line =~ /^\s*#\s*include\s+"([^"]+)"/;
			my $h = $1;
			my $where = "$rel:$.: \"$h\"";
			if ($h !~ m{/}) {
				push @bad, "$where names no part and is not in the file's folder"
					unless -e dirname($path) . "/$h";
				next;
			}
			my ($to) = $h =~ m{^([\w.]+)/};
			if ($to eq 'tools' || $h =~ m{^\.\./}) {
				push @bad, "$where reaches outside the layers";
				next;
			}
			if ($to ne 'kernels' && !$parts{$to}) {
				push @bad, "$where names no part";
				next;
			}
			if ($to eq 'app' && $from eq 'tools') {
				push @bad, "$where is another program's driver (tools/$tool.c may include app/${prog}*.h)"
					unless $allow->{'app(own)'} && $h =~ m{^app/\Q$prog\E(_\w+)?\.h$};
				next;
			}
			push @bad, "$where: $from may not include $to" unless $allow->{$to};
			push @bad, "$where: an internal header of $to included from $from"
				if $h =~ /_internal\.h$/ && $to ne $from;
		}
	}
	return @bad;
}

my @real = violations($root);
ok_(!@real, 'the tree includes only what libcommon/README.md allows');
print "# $_\n" for @real;

# The planted tree: a copy of the table, one clean file per part, and one
# forbidden include of each kind.
my $t = tempdir(CLEANUP => 1);
make_path("$t/libcommon/$_") for qw(base model tok gen app);
make_path("$t/kernels/cpu", "$t/tools");
system('cp', "$root/libcommon/README.md", "$t/libcommon/README.md") == 0 or die;
sub plant { my ($p, @inc) = @_; open my $f, '>', "$t/$p" or die; print $f "#include \"$_\"\n" for @inc; }
plant('libcommon/base/err.h');
plant('libcommon/model/model.h', 'base/err.h', 'kernels/rmsnorm.h');
plant('libcommon/tok/bpe_encode_internal.h');
plant('libcommon/app/lm_train.h', 'model/model.h');
plant('libcommon/app/rl_update.h');
plant('kernels/rmsnorm.h');
plant('tools/lm-train.c', 'app/lm_train.h', 'model/model.h');
ok_(!violations($t), 'the planted tree starts clean');

my @cases = (
	['libcommon/base/io.c', 'model/model.h', 'base may not include model'],
	['libcommon/tok/bpe.c', 'model/model.h', 'tok may not include model'],
	['kernels/cpu/rmsnorm.c', 'base/err.h', 'kernels may not include base'],
	['tools/lm-sample.c', 'app/rl_update.h', "another program's driver"],
	['tools/lm-task.c', 'tools/lm-train.c', 'reaches outside the layers'],
	['libcommon/gen/decode.c', 'tok/bpe_encode_internal.h', 'an internal header of tok'],
	['libcommon/model/ckpt.c', 'ckpt.h', 'names no part'],
);
for my $c (@cases) {
	my ($file, $inc, $want) = @$c;
	plant($file, $inc);
	my @v = violations($t);
	ok_(@v == 1 && $v[0] =~ /\Q$want\E/, "a planted include is caught: $file -> $inc");
	print "# $_\n" for @v;
	unlink "$t/$file";
}
mkdir "$t/libcommon/extra";
ok_(grep(/folder the layer table does not list/, violations($t)) == 1, 'an unlisted part is caught');
print "1..$n\n";
