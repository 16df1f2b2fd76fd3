#!/usr/bin/env python3
"""bench/hf_crosscheck.py HF_DIR LOGITS: load an lm-train export with
transformers' AutoModelForCausalLM and compare its fp32 logits on the token
ids stored in LOGITS (written by lm-train --dump-logits) with lm-train's.
Prints one JSON line; exits 1 when the max abs difference is 1e-4 or more."""
import json
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

TOL = 1e-4


def main():
    hf_dir, logits_path = sys.argv[1:3]
    try:
        model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()
    ref = load_file(logits_path)
    ids, want = ref["ids"].long(), ref["logits"]
    with torch.no_grad():
        got = model(ids).logits.float()
    diff = (got - want).abs().max().item()
    print(json.dumps({"check": "hf-logits", "dir": hf_dir, "class": type(model).__name__,
                      "shape": list(want.shape), "max_abs_diff": diff,
                      "max_abs_logit": want.abs().max().item(), "ok": diff < TOL}))
    sys.exit(0 if diff < TOL else 1)


if __name__ == "__main__":
    main()
