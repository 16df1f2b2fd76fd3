"""attention_sdpa.py: PyTorch scaled_dot_product_attention, bf16, timed like
attention_bench: same shapes, CUDA events, warm-up, median of many runs,
same FLOP convention (forward 4 B H T^2 D, backward 2.5x, halved when
causal).  Prints one JSON line per shape given as D:T:CAUSAL and backend:
the flash backend (the reference), and cuDNN's where PyTorch has it."""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

WARMUP, RUNS, TOKENS, WIDTH = 3, 21, 16384, 2048


def timed(fn):
    times = []
    for r in range(WARMUP + RUNS):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        if r >= WARMUP:
            times.append(e0.elapsed_time(e1))
    return sorted(times)[RUNS // 2]


def main():
    for spec in sys.argv[1:]:
        d, t, causal = (int(x) for x in spec.split(":"))
        b, h = max(TOKENS // t, 1), WIDTH // d
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v, do = (torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16, generator=g)
                       for _ in range(4))
        for x in (q, k, v):
            x.requires_grad_(True)
        flops = 4.0 * b * h * t * t * d * (0.5 if causal else 1)
        for name, backend in (("sdpa", SDPBackend.FLASH_ATTENTION),
                              ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)))
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                    bwd = timed(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
            except RuntimeError as e:
                print(json.dumps({"impl": name, "d": d, "T": t, "error": str(e)[:200]}), flush=True)
                continue
            print(json.dumps({"impl": name, "torch": torch.__version__, "d": d, "T": t, "B": b,
                              "H": h, "causal": causal, "fwd_ms": round(fwd, 4),
                              "bwd_ms": round(bwd, 4), "fwd_tflops": round(flops / fwd / 1e9, 1),
                              "bwd_tflops": round(2.5 * flops / bwd / 1e9, 1)}), flush=True)


if __name__ == "__main__":
    main()
