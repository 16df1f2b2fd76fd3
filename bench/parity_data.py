#!/usr/bin/env python3
"""bench/parity_data.py: the data side of the PyTorch loss-parity script
(bench/parity.sh, bench/parity.py), in plain Python (no numpy, no torch), so
that the CPU tests can check it: the windows file of lm-train --dump-windows
(lm-train(1), DUMPED WINDOWS), the token streams of lmpipe-tokens(5), and the
shards' tokens through `shard-pack -d` (so Python needs no zstd module).

  parity_data.py ids WINDOWS STEP     the inputs of that step's windows (the
                                      first T tokens of each), one line each,
                                      as lm-train --ids takes them
  parity_data.py check WINDOWS        every shard it lists holds the tokens it
                                      says, and every offset starts a window
                                      inside the training set; prints counts

SHARD_PACK (environment) names the shard-pack program (default: on the PATH).
"""
import array
import os
import struct
import subprocess
import sys

MAGIC = b"LMTS"
HEADER_MIN = 16


class Windows:
    """What lm-train --dump-windows wrote: the shape, the shards, the steps."""

    def __init__(self, path):
        self.context = self.batch = self.accum = None
        self.train, self.val = [], []   # (tokens, path), in the reader's order
        self.steps = {}                 # step -> [offset, ...]
        with open(path) as f:
            head = f.readline().split()
            if head != ["lmpipe-windows", "1"]:
                raise ValueError("%s: not an lm-train windows file (version 1)" % path)
            for n, line in enumerate(f, 2):
                key, _, rest = line.rstrip("\n").partition(" ")
                if key == "step":
                    vals = rest.split()
                    self.steps[int(vals[0])] = [int(v) for v in vals[1:]]
                elif key in ("train", "val"):
                    tokens, _, name = rest.partition(" ")
                    (self.train if key == "train" else self.val).append((int(tokens), name))
                elif key == "context":
                    self.context = int(rest)
                elif key == "batch":
                    v = rest.split()
                    self.batch, self.accum = int(v[0]), int(v[2])
                else:
                    raise ValueError("%s:%d: unknown line '%s'" % (path, n, key))
        if self.context is None or self.batch is None or not self.train:
            raise ValueError("%s: no context, batch or training shards" % path)


def read_stream(data, what="stream"):
    """All ids of a token stream (lmpipe-tokens(5), concatenated streams
    allowed), as an array of unsigned ints."""
    out, off = None, 0
    while off < len(data):
        magic, ver, dtype, hlen = struct.unpack_from("<4sBBH", data, off)
        if magic != MAGIC or ver != 1 or dtype not in (2, 4) or hlen < HEADER_MIN:
            raise ValueError("%s: not a token stream at byte %d" % (what, off))
        code = "H" if dtype == 2 else "I"
        if array.array(code).itemsize != dtype:
            code = "L" if dtype == 4 else code
        if out is None:
            out = array.array(code)
        off += hlen
        while True:
            (n,) = struct.unpack_from("<I", data, off)
            off += 4
            if n == 0:
                break
            block = array.array(code)
            block.frombytes(data[off:off + n * dtype])
            if sys.byteorder != "little":
                block.byteswap()
            out.extend(block)
            off += n * dtype
    return out if out is not None else array.array("I")


def shard_ids(path):
    """The ids of one shard, decompressed by shard-pack -d."""
    prog = os.environ.get("SHARD_PACK", "shard-pack")
    data = subprocess.run([prog, "-d", path], check=True, stdout=subprocess.PIPE).stdout
    return read_stream(data, path)


def load_shards(shards):
    """Each shard's ids, checked against the count the windows file lists."""
    parts = []
    for tokens, path in shards:
        ids = shard_ids(path)
        if len(ids) != tokens:
            raise ValueError("%s: %d tokens, the windows file says %d" % (path, len(ids), tokens))
        parts.append(ids)
    return parts


def concat(parts):
    out = array.array(parts[0].typecode)
    for p in parts:
        out.extend(p)
    return out


def val_windows(part, T):
    """lm-train's evaluation windows of one validation shard: T + 1 tokens
    from every multiple of T (floor((n - 1) / T) of them)."""
    return [k * T for k in range((len(part) - 1) // T)]


def main(argv):
    if len(argv) < 3 or argv[1] not in ("ids", "check"):
        sys.exit(__doc__)
    w = Windows(argv[2])
    T = w.context
    if argv[1] == "ids":
        train = concat(load_shards(w.train))
        for o in w.steps[int(argv[3])]:
            print(" ".join(str(t) for t in train[o:o + T]))
        return
    train = concat(load_shards(w.train))
    bad = [o for offs in w.steps.values() for o in offs if o + T + 1 > len(train)]
    if bad:
        sys.exit("parity_data.py: offset %d: no window of %d tokens there" % (bad[0], T + 1))
    val = load_shards(w.val)
    print("train_tokens %d steps %d windows_per_step %d val_tokens %d val_windows %d" % (
        len(train), len(w.steps), w.batch * w.accum, sum(len(v) for v in val),
        sum(len(val_windows(v, T)) for v in val)))


if __name__ == "__main__":
    main(sys.argv)
