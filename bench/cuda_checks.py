"""CUDA checks of the transformers plug-in on the default model (run where there is a GPU).

    python bench/cuda_checks.py --model DIR --heads DIR [--json out.json]

1. float32 on CUDA: ``generate(custom_generate=draftlattice.hf.generate)`` with the heads (tree
   of the p best drafts, no LM) equals plain greedy ``generate()`` token for token on chat and
   text prompts; tokens per target call.
2. bf16 on CUDA, batch 1: tokens/s of plain greedy ``generate()`` and of the plug-in (median of
   3 after a warm-up) on three of the prompts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

CHAT = [
    "What are the main causes of climate change?",
    "Give me three tips for learning a new language.",
    "Explain how a bicycle works.",
    "Write a short story about a lighthouse keeper.",
]
TEXT = [
    "The history of the Roman Empire",
    "Photosynthesis is the process by which",
]


def prompts(tokenizer) -> list[list[int]]:
    out = []
    for q in CHAT:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True)
        out.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    out += [tokenizer(t, add_special_tokens=False)["input_ids"] for t in TEXT]
    return out


def run(model, heads, ids, new_tokens, plugin: bool):
    x = torch.tensor([ids], device=model.device)
    kwargs = dict(max_new_tokens=new_tokens, do_sample=False, attention_mask=torch.ones_like(x))
    if plugin:
        import draftlattice.hf as dlhf

        kwargs.update(
            custom_generate=dlhf.generate, draft_heads=heads, draft_p=4, draft_k=8, return_dict_in_generate=True
        )
        out = model.generate(x, **kwargs)
        return out.sequences[0, len(ids) :].tolist(), out.draft_stats
    return model.generate(x, **kwargs)[0, len(ids) :].tolist(), None


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--heads", type=Path, required=True)
    p.add_argument("--new-tokens", type=int, default=96)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from draftlattice.hf import DraftHeads

    tokenizer = AutoTokenizer.from_pretrained(str(args.model))
    report = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    model = AutoModelForCausalLM.from_pretrained(str(args.model), dtype=torch.float32).cuda().eval()
    heads = DraftHeads.from_pretrained(args.heads, model, strict_name=False)
    identical, calls, tokens = [], 0, 0
    for ids in prompts(tokenizer):
        plain, _ = run(model, heads, ids, args.new_tokens, plugin=False)
        ours, stats = run(model, heads, ids, args.new_tokens, plugin=True)
        identical.append(plain == ours)
        calls += stats.target_calls
        tokens += stats.new_tokens
    report["float32_identical"] = identical
    report["float32_tokens_per_call"] = tokens / calls
    print(json.dumps(report), flush=True)
    model = model.to(torch.bfloat16)
    heads = heads.to(torch.bfloat16)
    for plugin in (False, True):
        rates = []
        for ids in prompts(tokenizer)[::2]:  # three of the six prompts, chat and text
            run(model, heads, ids, 16, plugin)  # warm-up
            times = []
            for _ in range(3):
                torch.cuda.synchronize()
                t = time.perf_counter()
                out, _ = run(model, heads, ids, args.new_tokens, plugin)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t)
            rates.append(len(out) / statistics.median(times))
        report["bf16_tokens_per_s_" + ("plugin" if plugin else "generate")] = statistics.median(rates)
    report["bf16_speedup"] = report["bf16_tokens_per_s_plugin"] / report["bf16_tokens_per_s_generate"]
    print(json.dumps(report), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all(identical) else 1


if __name__ == "__main__":
    sys.exit(main())
