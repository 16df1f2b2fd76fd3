#!/usr/bin/env python3
"""tiktoken_ids.py: expected GPT-2 ids for tests/bpe-exact.t, made with tiktoken.

Builds a tiktoken.Encoding from the CS336 fixtures gpt2_vocab.json and
gpt2_merges.txt (no download: mergeable ranks are the vocabulary ids, pat_str
is the GPT-2 regex, <|endoftext|> is 50256) and writes one case a line:

    NAME <TAB> SPECIALS <TAB> ids separated by spaces

NAME is a fixture file name or "hex:" and the UTF-8 bytes of a string in hex.
SPECIALS is "eot" (<|endoftext|> recognised), "eot2" (also
<|endoftext|><|endoftext|> = 50257, the longest match winning) or "none"
(encode_ordinary).  Text is split on the special tokens (longest first) and
each piece encoded with encode_ordinary; for "eot" the result is also checked
against tiktoken's own encode(allowed_special="all").

usage: tiktoken_ids.py FIXTURES_DIR OUT_FILE
"""
import json
import re
import sys

import tiktoken

GPT2_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def gpt2_encoding(fixtures, extra_specials=()):
    dec = byte_decoder()
    vocab = json.load(open(f"{fixtures}/gpt2_vocab.json", encoding="utf-8"))
    ranks = {bytes(dec[ch] for ch in tok): i for tok, i in vocab.items() if tok != EOT}
    specials = {EOT: vocab[EOT]}
    for k, s in enumerate(extra_specials):
        specials[s] = len(vocab) + k
    return tiktoken.Encoding(name="gpt2-fixtures", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                             special_tokens=specials)


def encode_split(enc, text, specials):
    if not specials:
        return enc.encode_ordinary(text)
    ids = []
    alt = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
    for part in re.split(f"({alt})", text):
        if part in specials:
            ids.append(enc._special_tokens[part])
        elif part:
            ids += enc.encode_ordinary(part)
    return ids


STRINGS = ["", "s", "🙃", "Hello, how are you?", "Héllò hôw are ü? 🙃",
           "Héllò hôw <|endoftext|><|endoftext|> are ü? 🙃<|endoftext|>",
           "<|endoftext|>", "a<|endoftext|", "  leading and trailing  \n\n\t"]
OVERLAP = "Hello, how <|endoftext|><|endoftext|> are you?<|endoftext|>"
FILES = ["address.txt", "german.txt", "tinystories_sample.txt",
         "special_token_trailing_newlines.txt", "special_token_double_newlines_non_whitespace.txt"]


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    enc = gpt2_encoding(fixtures)
    enc2 = gpt2_encoding(fixtures, [EOT + EOT])
    cases = [(f, open(f"{fixtures}/{f}", encoding="utf-8").read(), "eot") for f in FILES]
    cases.append(("tinystories_sample.txt", cases[2][1], "none"))
    cases += [("hex:" + s.encode().hex(), s, "eot") for s in STRINGS]
    cases.append(("hex:" + OVERLAP.encode().hex(), OVERLAP, "eot2"))
    cases.append(("hex:" + OVERLAP.encode().hex(), OVERLAP, "none"))
    with open(out, "w") as fp:
        fp.write(f"# GPT-2 ids from tiktoken {tiktoken.__version__} (tests/gen/tiktoken_ids.py)\n")
        for name, text, mode in cases:
            if mode == "eot2":
                ids = encode_split(enc2, text, [EOT, EOT + EOT])
            elif mode == "eot":
                ids = encode_split(enc, text, [EOT])
                assert ids == enc.encode(text, allowed_special="all"), name
            else:
                ids = enc.encode_ordinary(text)
            fp.write(f"{name}\t{mode}\t{' '.join(map(str, ids))}\n")


if __name__ == "__main__":
    main()
