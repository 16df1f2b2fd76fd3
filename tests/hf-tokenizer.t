#!/bin/sh
# tests/hf-tokenizer.t: Hugging Face tokenizer.json (issue 23 items 8, 9).
# lm-train --export-hf -t writes tokenizer.json, tokenizer_config.json,
# special_tokens_map.json (and vocab.json, merges.txt) beside the model and
# the eos/bos ids into config.json: their structure is checked here (the
# AutoTokenizer / generate() check needs transformers: tests/gpu/hf-export.sh
# on the GPU machine).  Reading: tokenizer.json works wherever a tokenizer
# is taken (-t FILE, --gpt2 DIR) and encodes exactly as the original; a
# hand-written file with [LEFT, RIGHT] merges and an added token after the
# vocabulary; --gpt2 DIR tries the common names and says which.
. "$(dirname "$0")/lib.sh"
cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 1500 1 | awk '{ print } NR % 10 == 0 { print "<|endoftext|>" }' > a.txt
bpe-learn -v 400 --special '<|endoftext|>' -o a.bpe a.txt 2>/dev/null
bpe-encode -t a.bpe a.txt | shard-pack -o d
lm-train -m tiny --vocab 400 --context 32 -n 2 -j 1 -d d -o ck -t a.bpe 2>/dev/null
ok $? "a tokenizer and a checkpoint that records it"
run lm-train -c ck/latest --export-hf hf -t a.bpe
is "$rc" 0 "--export-hf -t ($err)"
is "$(ls hf | tr '\n' ' ')" "config.json merges.txt model.safetensors special_tokens_map.json tokenizer.json tokenizer_config.json vocab.json " "the files AutoTokenizer and AutoModelForCausalLM read"
EOT=$(sed -n 's/^s \([0-9]*\)$/\1/p' a.bpe)
MERGES=$(sed -n 's/^merges //p' a.bpe) NTOK=$(sed -n 's/^tokens //p' a.bpe)
cat > check.pl <<'PERL'
use strict; use warnings; use JSON::PP;
sub load { local $/; open my $f, '<', $_[0] or die "$_[0]: $!"; decode_json(<$f>) }
my ($dir, $eot, $merges, $ntok) = @ARGV;
my $t = load("$dir/tokenizer.json"), my $c = load("$dir/tokenizer_config.json");
my $s = load("$dir/special_tokens_map.json"), my $m = load("$dir/config.json");
my @bad;
push @bad, "model.type" unless $t->{model}{type} eq 'BPE';
push @bad, "vocab size" unless keys %{$t->{model}{vocab}} == $ntok;
push @bad, "merges" unless @{$t->{model}{merges}} == $merges;
push @bad, "merge strings" if grep { !/^\S+ \S+$/ } @{$t->{model}{merges}};
push @bad, "pre_tokenizer" unless $t->{pre_tokenizer}{type} eq 'ByteLevel' && $t->{pre_tokenizer}{use_regex}
	&& !$t->{pre_tokenizer}{add_prefix_space};
push @bad, "decoder" unless $t->{decoder}{type} eq 'ByteLevel';
push @bad, "ignore_merges" if $t->{model}{ignore_merges};
my @a = @{$t->{added_tokens}};
push @bad, "added_tokens" unless @a == 1 && $a[0]{id} == $eot && $a[0]{content} eq '<|endoftext|>' && $a[0]{special};
push @bad, "vocab entry of eot" unless $t->{model}{vocab}{'<|endoftext|>'} == $eot;
push @bad, "space as U+0120" unless exists $t->{model}{vocab}{"\x{120}"};
push @bad, "eos_token" unless $c->{eos_token} eq '<|endoftext|>' && $s->{eos_token} eq '<|endoftext|>';
push @bad, "tokenizer_class" unless $c->{tokenizer_class} eq 'PreTrainedTokenizerFast';
push @bad, "model_max_length" unless $c->{model_max_length} == 32;
push @bad, "added_tokens_decoder" unless $c->{added_tokens_decoder}{$eot}{content} eq '<|endoftext|>';
push @bad, "config ids" unless $m->{eos_token_id} == $eot && $m->{bos_token_id} == $eot;
push @bad, "config model" unless $m->{model_type} eq 'llama' && $m->{vocab_size} == 400;  # the model's (>= the tokenizer's)
print join(", ", @bad), "\n";
exit(@bad ? 1 : 0);
PERL
run perl check.pl hf "$EOT" "$MERGES" "$NTOK"
is "$out" "" "tokenizer.json, tokenizer_config.json, special_tokens_map.json and config.json hold what transformers reads"
run lm-train -c ck/latest --export-hf hf2
case $err in *"no -t TOKENIZER"*) ok 0 "without -t: a note ($err)" ;; *) ok 1 "without -t: a note ($err)" ;; esac
perl -e 'print "lmpipe-tokenizer 1\npretokenizer gpt2\ntokens 256\nspecials 0\nmerges 0\n";
	for (0 .. 255) { my $c = chr; print "t $_ \"",
		($_ >= 0x20 && $_ < 0x7f && $c ne "\\" && $c ne "\"" ? $c : sprintf "\\x%02x", $_), "\"\n" }
	print "end\n"' > byte.tok
run lm-train -c ck/latest --export-hf hf3 -t byte.tok
is "$rc" 1 "--export-hf with another tokenizer than the checkpoint's: exit 1 ($err)"

# Reading it back: the same ids as the original, through -t and --gpt2.
bpe-encode -t a.bpe --text a.txt > want.txt
bpe-encode -t hf/tokenizer.json --text a.txt > got1.txt
cmp -s want.txt got1.txt; ok $? "-t tokenizer.json encodes as the original"
mkdir j && cp hf/tokenizer.json j/
bpe-encode --gpt2 j --text a.txt > got2.txt
cmp -s want.txt got2.txt; ok $? "--gpt2 DIR finds DIR/tokenizer.json"
mkdir m && cp hf/vocab.json m/gpt2-vocab.json && cp hf/merges.txt m/gpt2-merges.txt
bpe-encode --gpt2 m --text a.txt > got3.txt
cmp -s want.txt got3.txt; ok $? "--gpt2 DIR finds gpt2-vocab.json + gpt2-merges.txt"
mkdir none
run bpe-encode --gpt2 none --text a.txt
is "$err" "bpe-encode: none: no tokenizer files (tried tokenizer.json, vocab.json + merges.txt, gpt2-vocab.json + gpt2-merges.txt, encoder.json + vocab.bpe)" "--gpt2 DIR without them names what it tried"
run lm-sample -c ck/latest -t hf/tokenizer.json --max-tokens 3 -j 1 "The "
is "$rc" 0 "lm-sample takes tokenizer.json (and it is the checkpoint's) ($err)"

# A hand-written tokenizer.json: merges as pairs, an added special token
# after the vocabulary.
perl -e 'use JSON::PP; my @b = ((33 .. 126), (161 .. 172), (174 .. 255)); my %s = map { $_ => 1 } @b;
	my $n = 0; my %enc; for my $c (0 .. 255) { $enc{$c} = $s{$c} ? chr($c) : chr(256 + $n++) }
	my %v = map { ($enc{$_} => $_) } 0 .. 255; $v{"he"} = 256;
	print JSON::PP->new->utf8->canonical->encode({ model => { type => "BPE", vocab => \%v, merges => [["h", "e"]] },
		pre_tokenizer => { type => "ByteLevel", add_prefix_space => JSON::PP::false, use_regex => JSON::PP::true },
		added_tokens => [{ id => 257, content => "<|endoftext|>", special => JSON::PP::true }] })' > hand.json
printf 'hehe<|endoftext|>h' > hand.txt
run bpe-encode -t hand.json --text hand.txt
is "$(printf '%s\n' "$out" | tr '\n' ' ')" "256 256 257 104 " "pair merges and an added special token"
perl -e 'print q({"model":{"type":"WordPiece","vocab":{}},"pre_tokenizer":{"type":"BertPreTokenizer"}})' > wp.json
run bpe-encode -t wp.json --text hand.txt
is "$err" "bpe-encode: wp.json: model WordPiece: only a BPE model is supported" "another model is refused by name"
perl -e 'print q({"model":{"type":"BPE","vocab":{},"merges":[]},"pre_tokenizer":{"type":"Metaspace"}})' > ms.json
run bpe-encode -t ms.json --text hand.txt
is "$err" "bpe-encode: ms.json: pre_tokenizer Metaspace: only GPT-2's (ByteLevel with its regex) is supported" "another pre-tokenizer is refused by name"
done_testing
