#!/usr/bin/env python3
"""bench/parity.py: the PyTorch side of bench/parity.sh, the loss-parity check
of the CUDA backend issue: the model of torch_llama.py (bf16 autocast,
torch.compile, fused AdamW, SDPA) trained from lmpipe's initial weights (a
--export-hf of lm-train's step 0) on the windows lm-train trained on, in its
order (lm-train --dump-windows, read by parity_data.py), with lm-train's
hyper-parameters and schedule (lm-train(1): AdamW with decoupled weight decay
on the matrices and the embedding, none on the gains; the learning rate
LR x t / WARMUP for t < WARMUP, then a cosine to LR_MIN_RATIO x LR at STEPS;
clipping at CLIP), evaluated on lm-train's validation windows (every
multiple of T of each validation shard) every EVAL steps and at the end.

Prints one JSON line per evaluation: step, lmpipe's and PyTorch's validation
nats/token and bits/byte (nats/token x validation tokens / VALID_BYTES /
ln 2), their difference, and the mean training loss of both over the steps
since the last evaluation; first a line comparing the first step's training
loss (the same weights on the same windows: any mismatch of weights or data
shows there); last a summary with the largest difference against the bar
(0.01 nats/token) and PyTorch's training seconds.  A table of the same goes
to stderr.

usage: parity.py WINDOWS INIT_HF_DIR LMPIPE_LOG VALID_BYTES STEPS EVAL
       (environment: LR 2e-3, LR_MIN_RATIO 0.1, WARMUP 200, WEIGHT_DECAY 0.1,
       BETA1 0.9, BETA2 0.95, EPS 1e-8, CLIP 1.0, EVAL_BATCH 256)
"""
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_data  # noqa: E402
from torch_llama import Model  # noqa: E402

BAR = 0.01
ST_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def env(name, default):
    return float(os.environ.get(name, default))


def load_safetensors(path):
    """name -> tensor of a safetensors file (no safetensors module needed)."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw)
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        t = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=ST_DTYPES[h["dtype"]])
        out[name] = t.reshape(h["shape"])
    return out


def init_model(hf_dir, dev):
    """torch_llama.Model of the exported shape, holding the exported weights."""
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    for key, want in (("rope_theta", 10000.0), ("rms_norm_eps", 1e-5), ("tie_word_embeddings", False)):
        if abs(float(cfg[key]) - float(want)) > 1e-12 * max(1.0, abs(float(want))):
            sys.exit("parity.py: %s is %s; torch_llama.py's model has %s" % (key, cfg[key], want))
    if cfg["num_key_value_heads"] != cfg["num_attention_heads"]:
        sys.exit("parity.py: grouped-query attention is not in torch_llama.py's model")
    V, T, D = cfg["vocab_size"], cfg["max_position_embeddings"], cfg["hidden_size"]
    L, H, FF = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["intermediate_size"]
    model = Model(V, T, D, L, H, FF)
    w = load_safetensors(os.path.join(hf_dir, "model.safetensors"))
    p = "model.layers.%d."
    with torch.no_grad():
        model.emb.weight.copy_(w["model.embed_tokens.weight"])
        model.lnf.copy_(w["model.norm.weight"])
        model.head.weight.copy_(w["lm_head.weight"])
        for i, blk in enumerate(model.blocks):
            g = lambda name: w[(p % i) + name]  # noqa: E731
            blk.ln1.copy_(g("input_layernorm.weight"))
            blk.ln2.copy_(g("post_attention_layernorm.weight"))
            blk.qkv.weight.copy_(torch.cat([g("self_attn.%s_proj.weight" % x) for x in "qkv"]))
            blk.o.weight.copy_(g("self_attn.o_proj.weight"))
            blk.gate_up.weight.copy_(torch.cat([g("mlp.gate_proj.weight"), g("mlp.up_proj.weight")]))
            blk.down.weight.copy_(g("mlp.down_proj.weight"))
    return model.to(dev), V, T


def to_tensor(ids, dev):
    """A parity_data id array as an int64 tensor on dev."""
    kind = torch.int16 if ids.itemsize == 2 else torch.int32
    t = torch.frombuffer(bytearray(ids.tobytes()), dtype=kind).to(torch.int64)
    return (t & 0xFFFF if ids.itemsize == 2 else t).to(dev)


def lmpipe_log(path):
    """lm-train's log: step -> training loss, step -> validation loss."""
    train, val = {}, {}
    for line in open(path):
        r = json.loads(line)
        if "val_loss" in r:
            val[r["step"]] = r["val_loss"]
        elif "loss" in r and "step" in r:
            train[r["step"]] = r["loss"]
    return train, val


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    win_path, hf_dir, log_path = sys.argv[1:4]
    vbytes, steps, every = (int(x) for x in sys.argv[4:7])
    lr, floor = env("LR", 2e-3), env("LR_MIN_RATIO", 0.1)
    warmup, clip = int(env("WARMUP", 200)), env("CLIP", 1.0)
    dev = torch.device("cuda")
    w = parity_data.Windows(win_path)
    model, V, T = init_model(hf_dir, dev)
    if w.context != T:
        sys.exit("parity.py: the windows are of context %d, the model's is %d" % (w.context, T))
    if len(w.steps) < steps:
        sys.exit("parity.py: %s holds %d steps, fewer than %d" % (win_path, len(w.steps), steps))
    train = to_tensor(parity_data.concat(parity_data.load_shards(w.train)), dev)
    val = [to_tensor(v, dev) for v in parity_data.load_shards(w.val)]
    vtok = sum(v.numel() for v in val)
    order = torch.tensor([w.steps[s] for s in range(1, steps + 1)], dtype=torch.int64, device=dev)
    offs = torch.arange(T + 1, device=dev)
    lm_train, lm_val = lmpipe_log(log_path)

    named = list(model.named_parameters())
    groups = [{"params": [p for _, p in named if p.dim() == 2], "weight_decay": env("WEIGHT_DECAY", 0.1)},
              {"params": [p for _, p in named if p.dim() != 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(env("BETA1", 0.9), env("BETA2", 0.95)),
                            eps=env("EPS", 1e-8), fused=True)
    fwd = torch.compile(model)

    def lr_at(t):  # lm-train's schedule at 0-based step t (schedule.c)
        if t < warmup:
            return lr * t / warmup
        if t > steps or steps <= warmup:
            return lr * floor
        frac = (t - warmup) / (steps - warmup)
        return lr * (floor + 0.5 * (1 + math.cos(math.pi * frac)) * (1 - floor))

    def step(t):
        win = train[order[t][:, None] + offs]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(win[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, V), win[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for g in opt.param_groups:
            g["lr"] = lr_at(t)
        opt.step()
        return loss.detach()

    @torch.no_grad()
    def evaluate():
        total, count = torch.zeros((), dtype=torch.float64, device=dev), 0
        eb = int(env("EVAL_BATCH", 256))
        for v in val:
            n = (v.numel() - 1) // T
            for b0 in range(0, n, eb):
                win = v[torch.arange(b0, min(n, b0 + eb), device=dev)[:, None] * T + offs]
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = fwd(win[:, :-1])
                total += F.cross_entropy(logits.float().reshape(-1, V), win[:, 1:].reshape(-1),
                                         reduction="sum").double()
                count += win[:, 1:].numel()
        return total.item() / count

    bpb = lambda nats: nats * vtok / vbytes / math.log(2)  # noqa: E731
    rows, losses, train_s = [], [], 0.0
    torch.cuda.synchronize()
    t0 = time.time()
    for t in range(steps):
        losses.append(step(t))
        if t == 0:
            first = losses[0].item()
            print(json.dumps({"check": "step 1 training loss", "lmpipe": lm_train.get(1),
                              "torch": round(first, 6),
                              "diff": None if 1 not in lm_train else round(first - lm_train[1], 6)}),
                  flush=True)
            t0 = time.time()  # compilation excluded
        s = t + 1
        if s % every == 0 or s == steps:
            torch.cuda.synchronize()
            train_s += time.time() - t0
            nats = evaluate()
            since = [x for x in range(s - len(losses) + 1, s + 1)]
            tl = torch.stack(losses).double().mean().item()
            ll = [lm_train[x] for x in since if x in lm_train]
            row = {"step": s, "lmpipe_nats": lm_val.get(s), "torch_nats": round(nats, 5),
                   "diff_nats": None if s not in lm_val else round(lm_val[s] - nats, 5),
                   "lmpipe_bits_per_byte": None if s not in lm_val else round(bpb(lm_val[s]), 4),
                   "torch_bits_per_byte": round(bpb(nats), 4),
                   "lmpipe_train_mean": round(sum(ll) / len(ll), 5) if ll else None,
                   "torch_train_mean": round(tl, 5), "torch_train_s": round(train_s, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            losses = []
            torch.cuda.synchronize()
            t0 = time.time()
    diffs = [abs(r["diff_nats"]) for r in rows if r["diff_nats"] is not None]
    worst = max(diffs) if diffs else None
    print(json.dumps({"summary": "loss parity", "evaluations": len(rows), "compared": len(diffs),
                      "max_abs_diff_nats": worst, "bar_nats": BAR,
                      "within_bar": worst is not None and len(diffs) == len(rows) and worst <= BAR,
                      "valid_tokens": vtok, "valid_bytes": vbytes, "torch": torch.__version__,
                      "torch_train_s": round(train_s, 1)}), flush=True)
    print("%6s %12s %12s %9s %9s %9s" % ("step", "lmpipe nats", "torch nats", "diff", "lm bpb",
                                         "torch bpb"), file=sys.stderr)
    for r in rows:
        print("%6d %12s %12.5f %9s %9s %9.4f" % (r["step"], r["lmpipe_nats"], r["torch_nats"],
                                                  r["diff_nats"], r["lmpipe_bits_per_byte"],
                                                  r["torch_bits_per_byte"]), file=sys.stderr)
    print("max |diff| %s nats/token (bar %g)" % (worst, BAR), file=sys.stderr)


if __name__ == "__main__":
    main()
