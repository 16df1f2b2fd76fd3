#!/usr/bin/env python3
"""bpe_encode_ref.py: bpe-encode beside tiktoken and Hugging Face tokenizers
on the same text, all asserting the same GPT-2 ids (run by bpe-encode.sh).

Encodes TEXT (ordinary encoding: special-token text is plain text) with
  lmpipe bpe-encode -j 1 and -j THREADS (whole process wall time, the
      tokenizer loaded from an lmpipe tokenizer file, best of REPS; the
      time of a run on empty input is shown as startup_s),
  tiktoken encode_ordinary and encode_ordinary_batch(num_threads=THREADS),
  tokenizers Tokenizer.encode_batch (ByteLevel BPE from the same files),
and prints one JSON line per measurement with MB/s and the ratio to
tiktoken's single-thread speed.  The batch references get the text cut into
documents at points where cutting cannot change the ids (a lone newline
between two printable ASCII characters); their concatenated ids are checked
against the whole-text ids, so the cut is verified too.

usage: bpe_encode_ref.py BPE_ENCODE TOKENIZER_FILE FIXTURES_DIR TEXT THREADS REPS
"""
import json
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gen"))
from tiktoken_ids import gpt2_encoding  # noqa: E402

DOC_TARGET = 64 << 10


def read_stream(data):
    ids, p = [], 0
    while p < len(data):
        assert data[p:p + 4] == b"LMTS", "bad token stream"
        dtype, hlen = data[p + 5], struct.unpack_from("<H", data, p + 6)[0]
        p += hlen
        fmt = "<%d" + ("H" if dtype == 2 else "I")
        while True:
            n = struct.unpack_from("<I", data, p)[0]
            p += 4
            if n == 0:
                break
            ids.extend(struct.unpack_from(fmt % n, data, p))
            p += n * dtype
    return ids


def best(fn, reps):
    t = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        t = dt if t is None or dt < t else t
    return t, out


def safe_docs(text):
    docs, start, i = [], 0, DOC_TARGET
    while i < len(text) - 1:
        if (text[i - 1] == "\n" and "!" <= text[i - 2] <= "~" and "!" <= text[i] <= "~"):
            docs.append(text[start:i])
            start, i = i, i + DOC_TARGET
        else:
            i += 1
    docs.append(text[start:])
    return docs


def main():
    bpe_encode, tok_file, fixtures, text_path, threads, reps = sys.argv[1:7]
    threads, reps = int(threads), int(reps)
    raw = open(text_path, "rb").read()
    text = raw.decode("utf-8")
    mb = len(raw) / 1e6
    rows = []

    def emit(impl, nthreads, seconds, **extra):
        row = {"bench": "bpe-encode", "impl": impl, "threads": nthreads, "mb": round(mb, 2),
               "seconds": round(seconds, 4), "mb_per_s": round(mb / seconds, 2)}
        row.update(extra)
        rows.append(row)

    enc = gpt2_encoding(fixtures)
    t_tt, want = best(lambda: enc.encode_ordinary(text), reps)
    emit("tiktoken encode_ordinary", 1, t_tt, version=__import__("tiktoken").__version__)
    docs = safe_docs(text)
    t_ttb, got = best(lambda: enc.encode_ordinary_batch(docs, num_threads=threads), reps)
    assert [i for d in got for i in d] == want, "tiktoken batch ids differ from whole-text ids"
    emit("tiktoken encode_ordinary_batch", threads, t_ttb, docs=len(docs))

    os.environ["RAYON_NUM_THREADS"] = str(threads)
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    hf = Tokenizer(models.BPE.from_file(f"{fixtures}/gpt2_vocab.json", f"{fixtures}/gpt2_merges.txt"))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    t_hf, got = best(lambda: hf.encode_batch(docs, add_special_tokens=False), reps)
    hf_ids = [i for e in got for i in e.ids]
    emit("tokenizers encode_batch", threads, t_hf, version=__import__("tokenizers").__version__,
         same_ids=hf_ids == want)

    for j in (1, threads):
        cmd = [bpe_encode, "-t", tok_file, "--no-specials", "-j", str(j)]
        t0, _ = best(lambda: subprocess.run(cmd + ["/dev/null"], check=True, stdout=subprocess.PIPE), reps)
        t, out = best(lambda: subprocess.run(cmd + [text_path], check=True, stdout=subprocess.PIPE).stdout,
                      reps)
        assert read_stream(out) == want, f"bpe-encode -j {j} ids differ from tiktoken"
        emit("lmpipe bpe-encode", j, t, same_ids=True, startup_s=round(t0, 4),
             mb_per_s_after_startup=round(mb / (t - t0), 2))

    for row in rows:
        row["x_tiktoken_1thread"] = round(t_tt / row["seconds"], 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
