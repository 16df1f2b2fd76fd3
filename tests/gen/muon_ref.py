#!/usr/bin/env python3
"""muon_ref.py: reference tensors for lmpipe's Muon, made with torch.optim.Muon.

Writes tests/data/muon_ref.safetensors (about 300 KB, all tensors F32), read by
tests/unit/test_muon.c (CPU, fp32, 1e-5 relative) and tests/gpu/test_backend.c
(CUDA, bf16 tolerance).  CPU tensors only; deterministic (seed below).

torch.optim.Muon orthogonalises in bf16 (torch.optim._muon._zeropower_via_
newtonschulz casts with grad.bfloat16()).  The fp32 reference comes from the
same Muon class with that function replaced by a copy whose only difference is
the cast (.bfloat16() -> .float()): the copy is made from the function's own
source, which is printed, and the script checks that the two agree within bf16
tolerance and that the patch was the one called.  The unpatched (bf16) results
are stored too.  An fp64 run of the patched copy shows how far fp32 itself is
from exact (printed, not stored).

For each shape S (rows x cols; the names below):
    S.p0              initial parameter
    S.g1 .. S.gK      the gradients of steps 1..K
    S.buf1 .. S.bufK  the momentum buffer after each step (it depends only on
                      the gradients, so it is the same for both scalings and
                      both precisions; the script checks that)
    S.FN.fp32.pK      parameter after step K, FN = original | match_rms_adamw
    S.FN.bf16.pK      the same with torch's own bf16 Newton-Schulz
    S.ns_in           a random matrix; S.ns_fp32 and S.ns_bf16 its
                      Newton-Schulz result (the function alone, 5 steps)
The hyper-parameters are in the file's __metadata__ (all values strings).

usage: python3 tests/gen/muon_ref.py [OUT]   (default tests/data/muon_ref.safetensors)
"""
import inspect
import json
import os
import struct
import sys

import torch
import torch.optim._muon as muon_mod

SEED = 1234
STEPS = 3
MOMENTUM = 0.95
NS_STEPS = 5
SHAPES = {"sq32": (32, 32), "wide16x48": (16, 48), "tall48x16": (48, 16), "tall40x24": (40, 24)}
# Different lr and decay per scaling so that a swapped scalar shows.
FNS = {
    "original": {"adjust_lr_fn": None, "lr": 0.02, "weight_decay": 0.05},
    "match_rms_adamw": {"adjust_lr_fn": "match_rms_adamw", "lr": 0.003, "weight_decay": 0.1},
}
BF16_REL_TOL = 0.05   # Frobenius-relative: 5 NS steps in bf16 against fp32


def make_fp32_patch():
    """The torch function with its one bf16 cast made an fp32 cast."""
    orig = muon_mod._zeropower_via_newtonschulz
    src = inspect.getsource(orig)
    print("---- torch.optim._muon._zeropower_via_newtonschulz (torch %s) ----" % torch.__version__)
    print(src)
    print("---- end of source ----")
    assert src.count(".bfloat16()") == 1, "expected exactly one .bfloat16() cast in the source"
    patched_src = src.replace(".bfloat16()", ".float()")
    assert patched_src.count("bfloat16") == 0, "another bf16 use left in the source"
    ns = dict(orig.__globals__)
    exec(compile(patched_src, "<fp32 patch of _zeropower_via_newtonschulz>", "exec"), ns)
    return orig, ns["_zeropower_via_newtonschulz"]


def ns_args():
    """torch 2.11's function has no use_addmm argument; earlier ones do."""
    params = inspect.signature(muon_mod._zeropower_via_newtonschulz).parameters
    coeffs = (muon_mod.DEFAULT_A, muon_mod.DEFAULT_B, muon_mod.DEFAULT_C)
    return (coeffs, NS_STEPS, muon_mod.EPS) + ((False,) if "use_addmm" in params else ())


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp(min=1e-30)).item()


def run_muon(p0, grads, fn, dtype):
    """Steps of torch.optim.Muon; returns the parameter and buffer after each."""
    p = torch.nn.Parameter(p0.clone().to(dtype))
    opt = torch.optim.Muon([p], lr=fn["lr"], weight_decay=fn["weight_decay"], momentum=MOMENTUM,
                           nesterov=True, ns_steps=NS_STEPS, adjust_lr_fn=fn["adjust_lr_fn"])
    ps, bufs = [], []
    for g in grads:
        p.grad = g.clone().to(dtype)
        opt.step()
        ps.append(p.detach().clone())
        bufs.append(opt.state[p]["momentum_buffer"].clone())
    return ps, bufs


def write_safetensors(path, tensors, meta):
    header = {"__metadata__": meta}
    blobs, off = [], 0
    for name, t in tensors.items():
        t = t.detach().to(torch.float32).contiguous().flatten()
        data = struct.pack("<%df" % t.numel(), *t.tolist())
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    return 8 + len(h) + off


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "data", "muon_ref.safetensors")
    torch.manual_seed(SEED)
    orig, fp32_ns = make_fp32_patch()
    calls = {"n": 0}

    def counted_fp32(*a, **k):
        calls["n"] += 1
        return fp32_ns(*a, **k)

    coeffs = (muon_mod.DEFAULT_A, muon_mod.DEFAULT_B, muon_mod.DEFAULT_C)
    tensors = {}
    worst = {"fp32_vs_fp64": 0.0, "bf16_vs_fp32": 0.0}
    for sname, (r, c) in SHAPES.items():
        p0 = torch.randn(r, c) * 0.05
        grads = [torch.randn(r, c) * (0.5 ** k) for k in range(STEPS)]
        tensors[sname + ".p0"] = p0
        for k, g in enumerate(grads):
            tensors["%s.g%d" % (sname, k + 1)] = g
        # Newton-Schulz alone, and the check that the patch differs only by dtype.
        x = torch.randn(r, c)
        ns32 = fp32_ns(x, *ns_args())
        ns16 = orig(x, *ns_args()).float()
        d = rel(ns16, ns32)
        print("%s: Newton-Schulz bf16 original vs fp32 patch: %.3g (tolerance %.3g)" % (sname, d, BF16_REL_TOL))
        assert d < BF16_REL_TOL, "the fp32 patch does not agree with torch's bf16 function"
        assert ns32.dtype == torch.float32
        tensors[sname + ".ns_in"] = x
        tensors[sname + ".ns_fp32"] = ns32
        tensors[sname + ".ns_bf16"] = ns16
        worst["bf16_vs_fp32"] = max(worst["bf16_vs_fp32"], d)
        ref_bufs = None
        for fname, fn in FNS.items():
            muon_mod._zeropower_via_newtonschulz = counted_fp32
            before = calls["n"]
            p32, b32 = run_muon(p0, grads, fn, torch.float32)
            assert calls["n"] - before == STEPS, "torch.optim.Muon did not call the patched function"
            p64, _ = run_muon(p0, grads, fn, torch.float64)
            muon_mod._zeropower_via_newtonschulz = orig
            p16, b16 = run_muon(p0, grads, fn, torch.float32)
            for k in range(STEPS):
                assert torch.equal(b32[k], b16[k]), "momentum buffer depends on the precision"
                if ref_bufs is not None:
                    assert torch.equal(ref_bufs[k], b32[k]), "momentum buffer depends on the scaling"
                dp = rel(p32[k] - p0, p64[k] - p0)
                db = rel(p16[k] - p0, p32[k] - p0)
                worst["fp32_vs_fp64"] = max(worst["fp32_vs_fp64"], dp)
                worst["bf16_vs_fp32"] = max(worst["bf16_vs_fp32"], db)
                print("%s %s step %d: change fp32 vs fp64 %.3g, bf16 vs fp32 %.3g" % (sname, fname, k + 1, dp, db))
                tensors["%s.%s.fp32.p%d" % (sname, fname, k + 1)] = p32[k]
                tensors["%s.%s.bf16.p%d" % (sname, fname, k + 1)] = p16[k]
            ref_bufs = b32
        for k in range(STEPS):
            tensors["%s.buf%d" % (sname, k + 1)] = ref_bufs[k]
    meta = {
        "format": "lmpipe muon reference",
        "version": "1",
        "torch": torch.__version__,
        "seed": str(SEED),
        "steps": str(STEPS),
        "momentum": repr(MOMENTUM),
        "nesterov": "true",
        "ns_steps": str(NS_STEPS),
        "ns_coefficients": ",".join(repr(v) for v in coeffs),
        "eps": repr(muon_mod.EPS),
        "shapes": ",".join("%s=%dx%d" % (n, r, c) for n, (r, c) in SHAPES.items()),
        "fns": ",".join(FNS),
    }
    for fname, fn in FNS.items():
        meta[fname + ".lr"] = repr(fn["lr"])
        meta[fname + ".weight_decay"] = repr(fn["weight_decay"])
    size = write_safetensors(out, tensors, meta)
    print(json.dumps({"out": out, "bytes": size, "tensors": len(tensors), **worst}))


if __name__ == "__main__":
    main()
