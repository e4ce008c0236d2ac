"""Drafting's share of a greedy decoding step, from the decoder's own stats (issue 14).

Decodes WikiText-2 test paragraph openings with the shipped default model and 4-gram, and prints
per drafter the seconds spent drafting (lattice build, rescoring, tree build) and verifying
(the target's forward and acceptance), per step and as a share of a step (prefills excluded).

    PYTHONPATH=python python bench/drafting_share.py [--prompts 20] [--max-new-tokens 64]
"""

from __future__ import annotations

import argparse

import torch

from draftlattice import NgramLM
from draftlattice.assets import WIKITEXT_TEST, data_file, model_asset
from draftlattice.decode import BlockwiseDecoder, LatticeDrafter, VanillaDrafter
from draftlattice.evaluate.prompts import paragraph_prompts
from draftlattice.model import BlockwiseLM
from draftlattice.tokenizer import load_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model = BlockwiseLM.from_pretrained(model_asset("default"))
    tokenizer = load_tokenizer(model_asset("tokenizer.json"))
    lm = NgramLM(model_asset("katz4.dlm"))
    prompts = paragraph_prompts(data_file(WIKITEXT_TEST), tokenizer, args.prompts, args.prompt_tokens)
    drafters = [
        ("vanilla", VanillaDrafter(), "greedy"),
        ("ngram 1-best, k=8", LatticeDrafter(lm, k=8, p=1, alpha=0.5), "greedy"),
        ("ngram 4-best tree, k=8", LatticeDrafter(lm, k=8, p=4, alpha=0.5), "tree"),
    ]
    print("| drafter | block efficiency | steps | drafting ms/step | verification ms/step | drafting share |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, drafter, verifier in drafters:
        decoder = BlockwiseDecoder(model, drafter, verifier=verifier)
        decoder.generate(prompts[0], 16)  # warm-up: allocations, first-call costs
        total = None
        for prompt in prompts:
            stats = decoder.generate(prompt, args.max_new_tokens).stats
            total = stats if total is None else total + stats
        steps = total.serial_calls - total.prefill_calls
        share = total.drafting_seconds / (total.drafting_seconds + total.verification_seconds)
        print(
            f"| {name} | {total.block_efficiency:.3f} | {steps} | {1e3 * total.drafting_seconds / steps:.3f} | "
            f"{1e3 * total.verification_seconds / steps:.3f} | {100 * share:.2f}% |"
        )


if __name__ == "__main__":
    main()
