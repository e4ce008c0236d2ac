"""What each weight format of the lean step costs in quality, on the default model, in one run:
perplexity on WikiText-2 raw test text (windows of --window tokens, the same tokens for every
format, and int4 on each of draftlattice's kernels the CPU runs) beside transformers' own bf16 and fp32 model, and how far each format's plain greedy
output agrees with transformers' bf16 greedy ``generate()`` on the demo's prompts (outputs equal,
and tokens before the first difference).

    python bench/weights_quality.py [--tokens 8192] [--window 512] [--chat 4] [--text 4] [--max-new-tokens 64]
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

from _default_model import demo_set
from draftlattice import _core
from draftlattice.assets import WIKITEXT_RAW_TEST, data_file
from draftlattice.default_model import load_default
from draftlattice.lean import LeanLlama


def nll_windows(logits_of, ids: torch.Tensor, window: int) -> float:
    """Mean negative log-likelihood of ``ids`` predicted window by window (no context across)."""
    total, count = 0.0, 0
    for start in range(0, ids.numel() - 1, window):
        chunk = ids[start : start + window + 1].unsqueeze(0)
        if chunk.shape[1] < 2:
            break
        logits = logits_of(chunk[:, :-1])
        total += float(F.cross_entropy(logits[0].float(), chunk[0, 1:], reduction="sum"))
        count += chunk.shape[1] - 1
    return total / count


def lean_logits(lean: LeanLlama):
    def logits_of(chunk: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(chunk.shape[1]).unsqueeze(0)
        return lean.logits(lean.hidden(chunk, positions, None, lean.new_cache(1, chunk.shape[1])))

    return logits_of


def agreement(outputs: list[list[int]], reference: list[list[int]]) -> tuple[int, float]:
    same = sum(a == b for a, b in zip(outputs, reference))
    prefix = 0
    for a, b in zip(outputs, reference):
        prefix += next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return same, prefix / max(sum(len(b) for b in reference), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--chat", type=int, default=4)
    parser.add_argument("--text", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    bundle, prompts = demo_set(args.chat, args.text, torch.bfloat16, args.threads)
    model32 = load_default(torch.float32).model
    text = data_file(WIKITEXT_RAW_TEST).read_text(encoding="utf-8")
    ids = torch.tensor(bundle.tokenizer(text[: 8 * args.tokens])["input_ids"][: args.tokens])
    eos = bundle.model.generation_config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    ways = {
        "transformers bf16": (lambda c: bundle.model(c).logits, None),
        "transformers fp32": (lambda c: model32(c).logits, None),
    }
    for name, model, weights in (
        ("lean fp32", model32, "dense"),
        ("lean bf16", bundle.model, "dense"),
        ("lean int8", bundle.model, "int8"),
        ("lean int4", bundle.model, "int4"),
    ):
        lean = LeanLlama(model, weights)
        ways[name] = (lean_logits(lean), lean)
    for kernel in _core.lowbit_kernels()[1:-1]:  # our other kernels: each computes a little differently
        lean = LeanLlama(bundle.model, "int4", kernel=kernel)
        ways[f"lean int4, {kernel} kernel"] = (lean_logits(lean), lean)
    reference = None
    print(
        f"{ids.numel()} WikiText-2 raw test tokens in windows of {args.window}; {len(prompts)} prompts x {args.max_new_tokens}"
    )
    print("| model | perplexity | greedy outputs = transformers bf16 | tokens before the first difference |")
    print("|---|---:|---:|---:|")
    with torch.inference_mode():
        for name, (logits_of, lean) in ways.items():
            ppl = math.exp(nll_windows(logits_of, ids, args.window))
            outputs = []
            for prompt in prompts:
                prompt_ids = torch.tensor([prompt.ids])
                if lean is not None:
                    outputs.append(lean.greedy(prompt_ids, args.max_new_tokens, eos))
                else:
                    model = bundle.model if "bf16" in name else model32
                    out = model.generate(
                        prompt_ids,
                        attention_mask=torch.ones_like(prompt_ids),
                        max_new_tokens=args.max_new_tokens,
                        do_sample=False,
                    )
                    outputs.append(out[0, prompt_ids.shape[1] :].tolist())
            reference = reference or outputs
            same, prefix = agreement(outputs, reference)
            print(f"| {name} | {ppl:.3f} | {same}/{len(prompts)} | {100 * prefix:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
