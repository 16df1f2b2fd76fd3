#!/usr/bin/env python3
"""bench/torch_llama_cpu.py: the PyTorch eager reference for the lm-train CPU
benchmark: the same model as lm-train (token embedding, pre-norm blocks with
RMSNorm, causal attention with rotate-half RoPE, SwiGLU, final RMSNorm,
untied LM head, no biases) and the same training step (forward, backward,
clipping at 1.0, AdamW), on random token batches, with
torch.set_num_threads(THREADS).  Prints one JSON line: median tokens/s over
the timed steps (the first WARMUP steps are not timed).

usage: torch_llama_cpu.py VOCAB CTX D LAYERS HEADS DFF BATCH STEPS THREADS
"""
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

WARMUP = 2


def rms_norm(x, w, eps=1e-5):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    return s.masked_fill(mask, float("-inf")).softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, d, h, dff):
        super().__init__()
        self.h = h
        self.ln1 = nn.Parameter(torch.ones(d))
        self.ln2 = nn.Parameter(torch.ones(d))
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate_up = nn.Linear(d, 2 * dff, bias=False)
        self.down = nn.Linear(dff, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(rms_norm(x, self.ln1)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        y = attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.o(y)
        g, u = self.gate_up(rms_norm(x, self.ln2)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


def rope(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Model(nn.Module):
    def __init__(self, vocab, ctx, d, layers, h, dff):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, h, dff) for _ in range(layers))
        self.lnf = nn.Parameter(torch.ones(d))
        self.head = nn.Linear(d, vocab, bias=False)
        hd = d // h
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        f = torch.outer(torch.arange(ctx).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def forward(self, ids):
        t = ids.shape[1]
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, self.cos[:t], self.sin[:t])
        return self.head(rms_norm(x, self.lnf))


def main():
    vocab, ctx, d, layers, h, dff, batch, steps, threads = map(int, sys.argv[1:10])
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    model = Model(vocab, ctx, d, layers, h, dff)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    rates = []
    for step in range(WARMUP + steps):
        data = torch.randint(0, vocab, (batch, ctx + 1))
        t0 = time.perf_counter()
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if step >= WARMUP:
            rates.append(batch * ctx / dt)
    rates.sort()
    print(json.dumps({"impl": "pytorch-eager", "torch": torch.__version__, "threads": threads,
                      "params": sum(p.numel() for p in model.parameters()),
                      "tokens_per_s": round(rates[len(rates) // 2], 1)}))


if __name__ == "__main__":
    main()
