#!/usr/bin/env python3
"""bench/hf_tokenizer_check.py HF_DIR TEXT IDS: the tokenizer and model that
lm-train --export-hf -t wrote, loaded with transformers: AutoTokenizer's ids
on TEXT must equal IDS (bpe-encode's, blank-separated), decode() must give
TEXT back, and AutoModelForCausalLM's generate() must run and stop at the
eos id of config.json.  Prints one JSON line per check; exits 1 on any
failure.  Called by bench/hf-tokenizer-check.sh."""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

NEW_TOKENS = 40


def main():
    hf_dir, text_path, ids_path = sys.argv[1:4]
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    with open(ids_path) as f:
        want = [int(x) for x in f.read().split()]
    tok = AutoTokenizer.from_pretrained(hf_dir)
    got = tok(text, add_special_tokens=False)["input_ids"]
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    ids_ok = got == want
    print(json.dumps({"check": "hf-tokenizer-ids", "class": type(tok).__name__, "tokens": len(want),
                      "ok": ids_ok, "first_difference": first if not ids_ok else None}))
    back = tok.decode(want)
    decode_ok = back == text
    print(json.dumps({"check": "hf-tokenizer-decode", "ok": decode_ok}))
    try:
        model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()
    eos = model.config.eos_token_id
    prompt = tok("Once upon a time", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=NEW_TOKENS, do_sample=False,
                             pad_token_id=eos)
    new = out[0, prompt["input_ids"].shape[1]:].tolist()
    gen_ok = eos == tok.eos_token_id and len(new) > 0 and (eos not in new or new.index(eos) == len(new) - 1)
    print(json.dumps({"check": "hf-generate", "eos_token_id": eos, "new_tokens": len(new),
                      "text": tok.decode(new), "ok": gen_ok}))
    sys.exit(0 if ids_ok and decode_ok and gen_ok else 1)


if __name__ == "__main__":
    main()
