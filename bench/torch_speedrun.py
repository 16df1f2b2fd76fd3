#!/usr/bin/env python3
"""bench/torch_speedrun.py: the PyTorch reference of bench/speedrun.sh: the
learn-ts recipe on the same token streams lm-train reads (bpe-encode's
output, lmpipe-tokens(5)), the model of torch_llama.py with q, k, v, gate
and up as separate matrices (so that torch.optim.Muon orthogonalises each
on its own, as lm-train does), CS336 initialisation, bf16 autocast, SDPA,
torch.compile of the model, clipping at 1.0, warmup then a cosine to 10 %
at STEPS; random windows of T + 1 tokens.

  adamw: fused AdamW (lr, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the
         matrices and the embedding, 0 on the gains) on everything;
  muon:  torch.optim.Muon (MUON_LR, momentum 0.95, Nesterov, 5 steps,
         MUON_WD, adjust_lr_fn original) on the blocks' matrices, the AdamW
         above on the embedding, the head and the gains.

Validation on all of VALID (windows of T + 1 at stride T), at every EVAL
steps and at the end.  One JSON line per evaluation: step, training seconds
(evaluations and the first step, which compiles, excluded; the first step's
time is in the last line), nats/token and bits/byte (nats/token x validation
tokens / validation bytes / ln 2, as bench/learn-ts.sh computes it); then one
line with the optimizer step's share, timed with CUDA events on 20 steps.

usage: torch_speedrun.py OPT TRAIN.tok VALID.tok VALID_BYTES STEPS EVAL
       (environment: BATCH 128, LR 2e-3, MUON_LR 0.02, MUON_WD 0.1, WARMUP 200)
"""
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_llama import rms_norm, rope  # noqa: E402

V, T, D, L, H, FF = 10000, 256, 512, 4, 16, 1344
TIMED_STEPS = 20


def read_tokens(path):
    """All ids of a token stream (lmpipe-tokens(5)), as an int64 tensor."""
    data = open(path, "rb").read()
    parts, off = [], 0
    while off < len(data):
        magic, ver, dtype, hlen = struct.unpack_from("<4sBBH", data, off)
        assert magic == b"LMTS" and ver == 1 and dtype in (2, 4), "%s: not a token stream" % path
        off += hlen
        while True:
            (n,) = struct.unpack_from("<I", data, off)
            off += 4
            if n == 0:
                break
            kind = torch.int16 if dtype == 2 else torch.int32
            t = torch.frombuffer(bytearray(data[off:off + n * dtype]), dtype=kind).to(torch.int64)
            parts.append(t & 0xFFFF if dtype == 2 else t)
            off += n * dtype
    return torch.cat(parts)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.Parameter(torch.ones(D))
        self.ln2 = nn.Parameter(torch.ones(D))
        self.q, self.k, self.v, self.o = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False)
        self.down = nn.Linear(FF, D, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = rms_norm(x, self.ln1)
        q, k, v = (m(h).view(b, t, H, D // H).transpose(1, 2) for m in (self.q, self.k, self.v))
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, D)
        x = x + self.o(y)
        h = rms_norm(x, self.ln2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.lnf = nn.Parameter(torch.ones(D))
        self.head = nn.Linear(D, V, bias=False)
        hd = D // H
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        f = torch.outer(torch.arange(T).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        # CS336: matrices N(0, 2 / (in + out)) and the embedding N(0, 1), cut at 3 sigma.
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 1.0 if name == "emb.weight" else math.sqrt(2.0 / (p.shape[0] + p.shape[1]))
                nn.init.trunc_normal_(p, 0.0, std, -3 * std, 3 * std)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, self.cos[:t], self.sin[:t])
        return self.head(rms_norm(x, self.lnf))


def main():
    opt_name, train_path, valid_path, vbytes, steps, every = sys.argv[1:7]
    vbytes, steps, every = int(vbytes), int(steps), int(every)
    batch = int(os.environ.get("BATCH", 128))
    lr, muon_lr = float(os.environ.get("LR", 2e-3)), float(os.environ.get("MUON_LR", 0.02))
    muon_wd, warmup = float(os.environ.get("MUON_WD", 0.1)), int(os.environ.get("WARMUP", 200))
    dev = torch.device("cuda")
    torch.manual_seed(0)
    train, valid = read_tokens(train_path).to(dev), read_tokens(valid_path).to(dev)
    model = Model().to(dev)
    named = list(model.named_parameters())
    matrices = [p for n, p in named if n.startswith("blocks.") and p.dim() == 2]
    decayed = [p for n, p in named if p.dim() == 2 and not n.startswith("blocks.")]
    gains = [p for n, p in named if p.dim() == 1]
    groups = [{"params": decayed, "weight_decay": 0.1}, {"params": gains, "weight_decay": 0.0}]
    if opt_name == "adamw":
        groups.insert(0, {"params": matrices, "weight_decay": 0.1})
        opts = [torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)]
    elif opt_name == "muon":
        opts = [torch.optim.Muon(matrices, lr=muon_lr, weight_decay=muon_wd, momentum=0.95,
                                 nesterov=True, ns_steps=5),
                torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)]
    else:
        sys.exit("torch_speedrun.py: unknown optimizer %s" % opt_name)
    for o in opts:
        for g in o.param_groups:
            g["peak"] = g["lr"]
    fwd = torch.compile(model)
    gen = torch.Generator(device=dev).manual_seed(0)
    starts_max = train.numel() - T - 1
    offs = torch.arange(T + 1, device=dev)

    def lr_factor(t):
        if t < warmup:
            return t / warmup
        frac = min(1.0, (t - warmup) / max(1, steps - warmup))
        return 0.1 + 0.5 * (1 + math.cos(math.pi * frac)) * 0.9

    def step(t, timing=None):
        idx = torch.randint(0, starts_max, (batch, 1), device=dev, generator=gen) + offs
        w = train[idx]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(w[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, V), w[:, 1:].reshape(-1))
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        f = lr_factor(t)
        if timing:
            timing[0].record()
        for o in opts:
            for g in o.param_groups:
                g["lr"] = g["peak"] * f
            o.step()
        if timing:
            timing[1].record()

    @torch.no_grad()
    def evaluate():
        n = (valid.numel() - 1) // T
        total, count = 0.0, 0
        for b0 in range(0, n, 256):
            idx = torch.arange(b0, min(n, b0 + 256), device=dev)[:, None] * T + offs
            w = valid[idx]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = fwd(w[:, :-1])
            total += F.cross_entropy(logits.float().reshape(-1, V), w[:, 1:].reshape(-1),
                                     reduction="sum").item()
            count += w[:, 1:].numel()
        return total / count

    train_s, t0 = 0.0, time.time()
    torch.cuda.synchronize()
    for t in range(steps):
        step(t)
        if t == 0:  # torch.compile's compilation, reported apart
            torch.cuda.synchronize()
            first_s = time.time() - t0
            t0 = time.time()
        if (t + 1) % every == 0 or t + 1 == steps:
            torch.cuda.synchronize()
            train_s += time.time() - t0
            nats = evaluate()
            print(json.dumps({"impl": "torch", "optimizer": opt_name, "step": t + 1,
                              "train_s": round(train_s, 1), "val_nats_per_token": round(nats, 4),
                              "val_bits_per_byte": round(nats * valid.numel() / vbytes / math.log(2), 4)}),
                  flush=True)
            torch.cuda.synchronize()
            t0 = time.time()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(TIMED_STEPS)]
    s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s0.record()
    for i in range(TIMED_STEPS):
        step(steps - 1, ev[i])
    s1.record()
    torch.cuda.synchronize()
    opt_ms = sum(a.elapsed_time(b) for a, b in ev) / TIMED_STEPS
    step_ms = s0.elapsed_time(s1) / TIMED_STEPS
    print(json.dumps({"impl": "torch", "optimizer": opt_name, "first_step_s": round(first_s, 1),
                      "step_ms": round(step_ms, 3),
                      "optimizer_ms": round(opt_ms, 3), "optimizer_share": round(opt_ms / step_ms, 4)}))


if __name__ == "__main__":
    main()
