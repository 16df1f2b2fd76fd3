#!/usr/bin/env python3
"""bench/torch_llama_gpu.py: the PyTorch reference for bench/lm-train-gpu.sh:
the model of torch_llama.py trained as the issue's figures were measured:
bf16 autocast, fused AdamW (lr 1e-3, betas 0.9/0.95, weight decay 0.1),
clipping at 1.0, SDPA attention; eager, or under torch.compile.  Random
token batches on the GPU.  The first WARMUP steps (compilation included) are
not timed; then STEPS steps between two CUDA events.  Prints one JSON line:
tokens/s, step time, MFU against 989 TFLOP/s (FLOPs per token: 6 x the
matrix parameters + 6 x layers x context x d_model for causal attention)
and peak GPU memory.

usage: torch_llama_gpu.py MODE VOCAB CTX D LAYERS HEADS DFF BATCH STEPS   (MODE: eager|compile)
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_llama import Model  # noqa: E402

WARMUP = 5
PEAK_TFLOPS = 989.0


def main():
    mode = sys.argv[1]
    vocab, ctx, d, layers, h, dff, batch, steps = map(int, sys.argv[2:10])
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Model(vocab, ctx, d, layers, h, dff).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)

    def step(data):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(data[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, vocab).float(), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    run = torch.compile(step) if mode == "compile" else step
    batches = [torch.randint(0, vocab, (batch, ctx + 1), device=dev) for _ in range(8)]
    for i in range(WARMUP):
        run(batches[i % len(batches)])
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0.record()
    for i in range(steps):
        loss = run(batches[i % len(batches)])
    t1.record()
    torch.cuda.synchronize()
    ms = t0.elapsed_time(t1) / steps
    matrix = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "emb" not in n)
    flops_tok = 6 * matrix + 6 * layers * ctx * d
    tps = batch * ctx / (ms / 1e3)
    print(json.dumps({"impl": "pytorch-" + mode, "torch": torch.__version__, "tokens_per_s": round(tps),
                      "step_ms": round(ms, 3), "mfu": round(tps * flops_tok / (PEAK_TFLOPS * 1e12), 4),
                      "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                      "loss": round(loss.item(), 4)}))


if __name__ == "__main__":
    main()
