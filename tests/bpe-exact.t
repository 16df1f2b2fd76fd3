#!/bin/sh
# tests/bpe-exact.t: bpe-encode gives tiktoken's GPT-2 ids on the CS336
# fixtures and strings (expected ids in tests/data/gpt2-tiktoken-ids.txt,
# made by tests/gen/tiktoken_ids.py), and bpe-decode gives the bytes back:
# on those, on every fixture, and on random bytes.
. "$(dirname "$0")/lib.sh"
need_data
fx=$LMPIPE_DATA/cs336-a1/fixtures
gpt2="--vocab $fx/gpt2_vocab.json --merges $fx/gpt2_merges.txt"
ids=$LMPIPE_ROOT/tests/data/gpt2-tiktoken-ids.txt

# one tokenizer file for the rest: faster to load than the JSON
bpe-encode $gpt2 --save-tokenizer "$TMP/gpt2.tok" </dev/null >/dev/null
ok $? "GPT-2 files converted to an lmpipe tokenizer"
tok="-t $TMP/gpt2.tok"

n=0
grep -v '^#' "$ids" >"$TMP/cases"
while IFS="$(printf '\t')" read -r name mode want; do
	n=$((n + 1))
	case $name in
	hex:*) perl -e 'print pack("H*", $ARGV[0])' "${name#hex:}" >"$TMP/in"; label="string $n" ;;
	*) cp "$fx/$name" "$TMP/in"; label=$name ;;
	esac
	case $mode in
	eot) flags= dflags= ;;
	eot2) flags="--special <|endoftext|><|endoftext|>" dflags=$flags ;;
	none) flags=--no-specials dflags= ;;
	esac
	got=$(bpe-encode $tok $flags --text "$TMP/in" | tr '\n' ' ' | sed 's/ *$//')
	is "$got" "$want" "$label ($mode): tiktoken's ids"
	case $name in *.txt)
		got=$(bpe-encode $tok $flags -j 2 --chunk 64 --text "$TMP/in" | tr '\n' ' ' | sed 's/ *$//')
		is "$got" "$want" "$label ($mode): the same in 64-byte chunks on 2 threads" ;;
	esac
	bpe-encode $tok $flags "$TMP/in" | bpe-decode $tok $dflags >"$TMP/back"
	cmp -s "$TMP/in" "$TMP/back"
	ok $? "$label ($mode): bpe-decode gives the bytes back"
done <"$TMP/cases"

cat "$fx"/*.txt "$fx"/corpus.en >"$TMP/all"
bpe-encode $tok -j 2 "$TMP/all" | bpe-decode $gpt2 | cmp -s - "$TMP/all"
ok $? "round trip of all fixtures (decoded with the GPT-2 files)"

for size in 17 100000; do
	head -c $size /dev/urandom >"$TMP/rnd"
	bpe-encode $tok -j 2 --chunk 64 "$TMP/rnd" | bpe-decode $tok | cmp -s - "$TMP/rnd"
	ok $? "round trip of $size random bytes"
	bpe-encode $tok --text "$TMP/rnd" | bpe-decode $tok --text | cmp -s - "$TMP/rnd"
	ok $? "round trip of $size random bytes through --text"
done
done_testing
