"""bench/torch_llama.py: the PyTorch model the lm-train benchmarks compare
against: the same model as lm-train (token embedding, pre-norm blocks with
RMSNorm, causal attention with rotate-half RoPE, SwiGLU, final RMSNorm,
untied LM head, no biases).  Imported by torch_llama_cpu.py and
torch_llama_gpu.py."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


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
