#!/usr/bin/env python3
"""bench/torch_llama_cpu.py: the PyTorch eager reference for the lm-train CPU
benchmark: the model of torch_llama.py and the same training step (forward, backward,
clipping at 1.0, AdamW), on random token batches, with
torch.set_num_threads(THREADS).  Prints one JSON line: median tokens/s over
the timed steps (the first WARMUP steps are not timed).

usage: torch_llama_cpu.py VOCAB CTX D LAYERS HEADS DFF BATCH STEPS THREADS
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_llama import Model  # noqa: E402

WARMUP = 2


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
