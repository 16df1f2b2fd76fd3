"""bench/hf_generate_cpu.py: Hugging Face generate() tokens/s on the CPU for
bench/lm-sample-cpu.sh: greedy, ROUNDS batches of BATCH prompts of PROMPT
ids one after another (prompt b of all ROUNDS * BATCH: the letters
lm-sample gets), NEW tokens each, no early stop; timed with NEW and with 1
new token (best of 3), decoding speed
= ROUNDS * BATCH * (NEW - 1) / (t_NEW - t_1).

usage: hf_generate_cpu.py HF_DIR BATCH PROMPT NEW THREADS [ROUNDS]
"""
import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM

REPEATS = 3


def main():
    path, batch, plen, new, threads = sys.argv[1], *map(int, sys.argv[2:6])
    rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    ids = [torch.tensor([[97 + (b * 7 + i * 3) % 26 for i in range(plen)]
                         for b in range(r * batch, (r + 1) * batch)]) for r in range(rounds)]
    mask = torch.ones_like(ids[0])

    def run(m):
        t0 = time.perf_counter()
        with torch.inference_mode():
            for x in ids:
                model.generate(x, attention_mask=mask, max_new_tokens=m, min_new_tokens=m,
                               do_sample=False, pad_token_id=0, eos_token_id=None)
        return time.perf_counter() - t0

    run(2)  # warm-up
    t_new = min(run(new) for _ in range(REPEATS))
    t_1 = min(run(1) for _ in range(REPEATS))
    print(json.dumps({"impl": "hf-generate", "torch": torch.__version__, "batch": batch,
                      "rounds": rounds, "prompt": plen, "new": new, "threads": threads,
                      "tokens_per_s": round(rounds * batch * (new - 1) / (t_new - t_1), 1),
                      "t_new_s": round(t_new, 4), "t_1_s": round(t_1, 4)}))


if __name__ == "__main__":
    main()
