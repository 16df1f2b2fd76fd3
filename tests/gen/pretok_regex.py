#!/usr/bin/env python3
"""pretok_regex.py: expected pre-token splits from the real regex.

Splits random multilingual byte strings with the GPT-2 pattern in Python's
`regex` module (as CS336 does) and prints one case per line:
    HEX-OF-BYTES LEN,LEN,...      (pre-token lengths in bytes)
Bytes are decoded with errors="surrogateescape", so each byte of an invalid
UTF-8 sequence becomes one lone surrogate: a character that is neither
letter, number nor space, as pretok.h specifies.  tests/unit/test_pretok.c
checks libcommon/text/pretok.c against tests/data/pretok-regex.txt, made by
    python3 tests/gen/pretok_regex.py 600 1 > tests/data/pretok-regex.txt
(needs the `regex` module; Debian: python3-regex).  For a larger check:
    python3 tests/gen/pretok_regex.py 200000 7 > /tmp/big.txt
    PRETOK_CASES=/tmp/big.txt build/tests/test_pretok
"""
import random
import sys

import regex

PAT = regex.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

# Pieces chosen to hit every branch: contractions (and near misses), each
# class in several scripts, every kind of whitespace, marks, emoji, controls.
PIECES = [
    "'s", "'d", "'m", "'t", "'ll", "'ve", "'re", "'S", "'LL", "'l", "'v", "'r", "'",
    "a", "Z", "é", "ß", "Ω", "Ж", "я", "ع", "中", "文", "ｶ", "가", "ǅ", "ʰ", "ー",
    "0", "7", "٣", "५", "๓", "Ⅻ", "½", "²", "𝟘", "〇",
    " ", " ", " ", "  ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\xa0",
    "\u1680", "\u2003", "\u2028", "\u2029", "\u202f", "\u3000", "\x1c", "\x1f",
    "\u200b", "\u180e", "\u0301", "\u094d", ".", ",", "!", "?", "-", "<|", "|>",
    "😀", "👍🏽", "🇫🇷", "€", "$", "\x00", "\x7f", "\ufeff",
]
BAD = [b"\x80", b"\xff", b"\xc0\xaf", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
       b"\xf0\x9f\x98", b"\xc3"]


def random_case(rng):
    out = bytearray()
    for _ in range(rng.randint(1, 24)):
        r = rng.random()
        if r < 0.08:
            out += rng.choice(BAD)
        elif r < 0.16:
            cp = rng.randint(0x80, 0x10FFFF)
            if 0xD800 <= cp <= 0xDFFF:
                continue
            out += chr(cp).encode()
        else:
            out += rng.choice(PIECES).encode()
    return bytes(out)


def split(b):
    text = b.decode("utf-8", errors="surrogateescape")
    return [len(m.group().encode("utf-8", errors="surrogateescape"))
            for m in PAT.finditer(text)]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    for _ in range(n):
        b = random_case(rng)
        lens = split(b)
        assert sum(lens) == len(b)
        print(b.hex(), ",".join(map(str, lens)))


if __name__ == "__main__":
    main()
