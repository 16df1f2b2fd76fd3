"""bench/hf_generate_gpu.py: Hugging Face generate() tokens/s on one GPU for
bench/lm-sample-gpu.sh: bf16, ROUNDS batches of BATCH prompts (the token ids
lm-sample encoded, one JSON array per line of IDS_FILE), NEW tokens each,
no early stop, top-p sampling; timed with NEW and with 1 new token (best of
3 after warm-up runs of both), decoding speed
= ROUNDS * BATCH * (NEW - 1) / (t_NEW - t_1).  MODE static: a static KV
cache, which transformers compiles with torch.compile; MODE dynamic: plain
generate().

usage: hf_generate_gpu.py HF_DIR IDS_FILE BATCH NEW ROUNDS TOP_P MODE
"""
import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM

REPEATS = 3


def main():
    path, ids_file = sys.argv[1], sys.argv[2]
    batch, new, rounds = map(int, sys.argv[3:6])
    top_p, mode = float(sys.argv[6]), sys.argv[7]
    rows = [json.loads(l) for l in open(ids_file)]
    plen = min(len(r) for r in rows)
    rows = [r[:plen] for r in rows]  # equal lengths: no padding
    need = rounds * batch
    rows = (rows * ((need + len(rows) - 1) // len(rows)))[:need]
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).cuda().eval()
    ids = [torch.tensor(rows[r * batch:(r + 1) * batch], device="cuda") for r in range(rounds)]
    mask = torch.ones_like(ids[0])
    extra = {"cache_implementation": "static"} if mode == "static" else {}
    torch.manual_seed(0)

    def run(m, n_rounds=rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            for x in ids[:n_rounds]:
                model.generate(x, attention_mask=mask, max_new_tokens=m, min_new_tokens=m,
                               do_sample=True, top_p=top_p, top_k=0, temperature=1.0,
                               pad_token_id=0, eos_token_id=None, **extra)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    run(new, 1)
    run(1, 1)  # warm-up (compiles the static-cache forward for both lengths)
    warm = time.perf_counter() - t0
    t_new = min(run(new) for _ in range(REPEATS))
    t_1 = min(run(1) for _ in range(REPEATS))
    print(json.dumps({"impl": "hf-generate-" + mode, "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name(), "batch": batch, "rounds": rounds,
                      "prompt": plen, "new": new, "top_p": top_p, "warmup_s": round(warm, 2),
                      "tokens_per_s": round(rounds * batch * (new - 1) / (t_new - t_1), 1),
                      "t_new_s": round(t_new, 4), "t_1_s": round(t_1, 4)}))


if __name__ == "__main__":
    main()
