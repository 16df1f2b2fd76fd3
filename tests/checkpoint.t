#!/bin/sh
# tests/checkpoint.t: checkpoints crafted or damaged by hand (issue 22): a
# small file whose metadata claims a large model is refused before anything
# is allocated from the claim; a bit flipped in a tensor is found at load and
# named with its tensor (CRC-32C per tensor, man 5 lmpipe-checkpoint);
# recorded hyper-parameters out of range are refused on --resume; a
# checkpoint written before checksums (none in its metadata) still loads.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1

perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok

# rewrite.pl IN OUT 'perl code over $h (the header) and $d (the data)'
cat > rewrite.pl <<'EOF2'
use strict; use warnings; use JSON::PP;
my ($in, $out, $code) = @ARGV;
open my $f, '<:raw', $in or die "$in: $!";
local $/; my $all = <$f>;
my $n = unpack 'Q<', substr($all, 0, 8);
our $h = decode_json(substr($all, 8, $n)); our $d = substr($all, 8 + $n);
eval $code; die $@ if $@;
my $j = JSON::PP->new->canonical->encode($h);
$j .= ' ' x ((8 - length($j) % 8) % 8);
open my $o, '>:raw', $out or die "$out: $!";
print $o pack('Q<', length $j), $j, $d;
EOF2

# 1. A few hundred bytes whose metadata claims 1 GB of weights (d_model 4096,
# 1 layer, d_ff 16384) and holds one tensor: refused without allocating it
# (under a 1 GB address-space limit where the sanitizers allow one).
perl -e 'use JSON::PP;
	my %m = ("lmpipe.format" => "checkpoint", "lmpipe.version" => "1", format => "pt",
		vocab_size => "256", context_length => "64", d_model => "4096", num_layers => "1",
		num_heads => "16", d_ff => "16384", rope_theta => "10000", tie_embeddings => "1",
		rope_pairing => "rotate_half");
	my $j = JSON::PP->new->canonical->encode({ __metadata__ => \%m,
		"model.norm.weight" => { dtype => "F32", shape => [2], data_offsets => [0, 8] } });
	$j .= " " x ((8 - length($j) % 8) % 8);
	print pack("Q<", length $j), $j, "\0" x 8' > claim.safetensors
limit=
[ "${LMPIPE_SANITIZE:-0}" = 1 ] || limit="ulimit -v 1000000;"
run sh -c "$limit lm-sample -c claim.safetensors -t byte.tok --max-tokens 1 x"
is "$rc" 1 "a checkpoint claiming a large model: exit 1"
is "$err" "lm-sample: claim.safetensors: no tensor 'model.embed_tokens.weight'" \
	"refused for the missing tensor, before allocating from the claim"

# 2. A real checkpoint, then one bit flipped in one tensor.
perl "$LMPIPE_ROOT/tests/mktext.pl" 200 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d < text.tok
lm-train -m tiny --vocab 256 --context 32 -b 4 -n 2 --warmup 1 -d d -o ck --ckpt-every 2 \
	-j 1 2>/dev/null
ok $? "a tiny checkpoint" || { done_testing; exit 1; }
run lm-sample -c ck/latest -t byte.tok --temperature 0 --max-tokens 4 x
is "$rc" 0 "it loads ($err)"
good=$out
T=model.layers.0.mlp.up_proj.weight
perl rewrite.pl ck/latest flip.safetensors '
	my ($b, $e) = @{$h->{"'$T'"}{data_offsets}};
	my $at = int(($b + $e) / 2);
	substr($d, $at, 1) = chr(ord(substr($d, $at, 1)) ^ 0x04);'
run lm-sample -c flip.safetensors -t byte.tok --temperature 0 --max-tokens 4 x
is "$rc" 1 "a flipped bit: exit 1"
case $err in
"lm-sample: flip.safetensors: tensor '$T': checksum mismatch (CRC-32C "*) ok 0 "named: $err" ;;
*) ok 1 "named: $err" ;;
esac
mkdir ck2 && cp flip.safetensors ck2/step-2.safetensors && ln -s step-2.safetensors ck2/latest
run lm-train -m tiny --vocab 256 --context 32 -b 4 -n 3 -d d -o ck2 --resume -j 1
is "$rc" 1 "lm-train refuses to resume from it"

# 2b. Recorded hyper-parameters out of range: an int field past 2^31 (it
# would wrap) and an evaluation stride past the context; --resume refuses both.
for bad in 4294967312 33; do
	perl rewrite.pl ck/latest hp.safetensors '
		my $t = decode_json($h->{__metadata__}{"lmpipe.train"});
		$t->{eval_stride} = '$bad';
		$h->{__metadata__}{"lmpipe.train"} = JSON::PP->new->canonical->encode($t);'
	rm -rf ck3 && mkdir ck3 && cp hp.safetensors ck3/step-2.safetensors && ln -s step-2.safetensors ck3/latest
	run lm-train -d d -o ck3 -n 3 --resume -j 1
	case $bad in
	33) is "$rc" 2 "eval_stride 33 of a context of 32: a usage error" ;;
	*) is "$rc" 1 "eval_stride $bad: refused" ;;
	esac
	case $err in
	*"'eval_stride' is not valid"*|*"evaluation stride of 33 tokens: it must be 1 to the context, 32"*) ok 0 "named: $err" ;;
	*) ok 1 "named: $err" ;;
	esac
done

# 2c. The residual stream's recorded types (--residual, --residual-grad): a
# name that is not one, and a bf16 gradient without the bf16 stream.
hp_resume() { # hp_resume PERL: ck/latest's hyper-parameters $t changed, resumed
	perl rewrite.pl ck/latest hp.safetensors '
		my $t = decode_json($h->{__metadata__}{"lmpipe.train"});
		'"$1"'
		$h->{__metadata__}{"lmpipe.train"} = JSON::PP->new->canonical->encode($t);'
	rm -rf ck3 && mkdir ck3 && cp hp.safetensors ck3/step-2.safetensors && ln -s step-2.safetensors ck3/latest
	run lm-train -d d -o ck3 -n 3 --resume -j 1
}
hp_resume '$t->{residual} = "f16";'
is "$rc" 1 "residual f16: refused"
case $err in *"'residual' is not valid"*) ok 0 "named: $err" ;; *) ok 1 "named: $err" ;; esac
hp_resume '$t->{residual} = "f32"; $t->{residual_grad} = "bf16";'
is "$rc" 2 "residual_grad bf16 with residual f32: a usage error"
case $err in *"lm-train: --residual-grad bf16 needs --residual bf16 (the stream itself)") ok 0 "named: $err" ;;
	*) ok 1 "named: $err" ;; esac
hp_resume 'delete $t->{residual}; delete $t->{residual_grad};'
is "$rc" 0 "a checkpoint that records neither resumes ($err)"

# 3. As written before checksums: no lmpipe.crc32c.* keys (nor lmpipe.build).
perl rewrite.pl ck/latest old.safetensors '
	delete $h->{__metadata__}{$_} for grep { /^lmpipe\.(crc32c\.|build$)/ } keys %{$h->{__metadata__}};'
grep -q crc32c old.safetensors
ok $((1 - $?)) "the old-style checkpoint has no checksums"
run lm-sample -c old.safetensors -t byte.tok --temperature 0 --max-tokens 4 x
is "$rc" 0 "a checkpoint without checksums loads ($err)"
is "$out" "$good" "and samples the same"
is "$(lm-train -c ck/latest --info | sed -n 's/^written by  *//p')" "lmpipe $(lm-train --version | cut -d' ' -f3)" \
	"a checkpoint records the build that wrote it (lmpipe.build, --info's 'written by')"
is "$(lm-train -c old.safetensors --info | sed -n 's/^written by  *//p')" "(not recorded)" \
	"... and one written before that says so"
done_testing
