"""The default model's trunk (one forward of the base model over new tokens after a cached
context) and its output projection against the number of new tokens: what each verified node
costs on top of plain decoding's one token. The node counts are interleaved round by round;
medians after 3 warm-up rounds. A causal block over the new tokens, no explicit mask (the
engine's verification forward passes a tree mask; bench/step_switch.py times that path).

    python bench/trunk_nodes.py [--context 300] [--nodes 1 3 5 9 13 17] [--rounds 25] [--threads 2]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import torch
from transformers import DynamicCache

from draftlattice.default_model import load_default


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3, 5, 9, 13, 17])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_default(torch.bfloat16).model
    generator = torch.Generator().manual_seed(0)
    context = torch.randint(0, model.config.vocab_size, (1, args.context), generator=generator)
    trunk, output = collections.defaultdict(list), collections.defaultdict(list)
    with torch.inference_mode():
        cache = DynamicCache()
        model.base_model(input_ids=context, cache=cache, use_cache=True)
        for round_ in range(args.rounds):
            for n in args.nodes:
                if cache.get_seq_length() > args.context:  # back to the context alone
                    cache.crop(args.context - cache.get_seq_length())
                ids = torch.randint(0, model.config.vocab_size, (1, n), generator=generator)
                positions = torch.arange(args.context, args.context + n)[None]
                start = time.perf_counter()
                hidden = model.base_model(input_ids=ids, position_ids=positions, cache=cache, use_cache=True)
                middle = time.perf_counter()
                model.lm_head(hidden.last_hidden_state).float()
                end = time.perf_counter()
                if round_ >= 3:
                    trunk[n].append(middle - start)
                    output[n].append(end - middle)
    print(f"default model, bf16, {args.threads} threads, {args.context}-token context; medians of {args.rounds - 3}")
    print("| new tokens | trunk ms | output projection ms |")
    print("|---:|---:|---:|")
    for n in args.nodes:
        print(f"| {n} | {1e3 * statistics.median(trunk[n]):.1f} | {1e3 * statistics.median(output[n]):.2f} |")


if __name__ == "__main__":
    main()
