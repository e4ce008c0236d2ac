"""``sample_alpha`` (the n-gram LM's weight in sampled lattice drafts) tuned on the default model,
on calibration prompts held out from the demo's: the chat questions the demo does not ask and
WikiText-2 raw *valid* paragraph openings (the demo reads *test*). Per temperature, the expected
accepted draft tokens per step of the ``ngram_multi`` drafter (p drafts, recursive rejection) at
every candidate weight, computed exactly from the rule's output law (apps/tune_sampling.py);
weight 0 is the heads' own law, i.e. the ``heads_multi`` row's drafts.

    python bench/tune_sample_alpha.py [--temperature 0.7 1.0] [--alphas 0 0.05 0.1 0.2 0.35]
        [--p 4] [--k 8] [--horizon H] [--chat 8] [--text 8] [--max-new-tokens 64] [--stride 4] [--lm F] [--json F]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from draftlattice.apps.demo_prompts import CHAT_QUESTIONS, paragraph_openings
from draftlattice.apps.tune_sampling import tune_sample_alpha
from draftlattice.assets import WIKITEXT_RAW_VALID, data_file
from draftlattice.decode import Sampling
from draftlattice.default_model import load_default

DEMO_CHAT = 4  # the demo asks the first four chat questions (apps/demo.py's default)


def calibration_prompts(bundle, chat: int, text: int) -> list[list[int]]:
    questions = CHAT_QUESTIONS[DEMO_CHAT : DEMO_CHAT + chat]
    if len(questions) < chat:
        raise SystemExit(f"only {len(CHAT_QUESTIONS) - DEMO_CHAT} chat questions are held out, {chat} asked")
    prompts = [bundle.chat_ids(q) for q in questions]
    openings = paragraph_openings(data_file(WIKITEXT_RAW_VALID), text) if text else []
    prompts += [bundle.tokenizer(o, add_special_tokens=False)["input_ids"] for o in openings]
    return prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--temperature", type=float, nargs="+", default=[0.7, 1.0])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2, 0.35])
    parser.add_argument("--p", type=int, default=4)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--horizon", type=int, help="draft with heads 2..H only (default: all the heads)")
    parser.add_argument("--chat", type=int, default=8)
    parser.add_argument("--text", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--stride", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lm", help="another n-gram LM over the model's tokens (default: the shipped katz4)")
    parser.add_argument("--json", help="write the tables here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_default(torch.bfloat16, lm=args.lm)
    prompts = calibration_prompts(bundle, args.chat, args.text)
    heads = bundle.sampling_heads if args.horizon is None else bundle.sampling_heads.truncated(args.horizon)
    print(
        f"default model (bf16), sampling heads, {args.lm or 'katz4'}; {args.chat} chat + {args.text} text held-out prompts, "
        f"{args.max_new_tokens} tokens, every {args.stride}th position; k={args.k} p={args.p} h={heads.horizon}"
    )
    results = []
    for temperature in args.temperature:
        start = time.perf_counter()
        tuning = tune_sample_alpha(
            bundle.model,
            heads,
            bundle.lm,
            prompts,
            Sampling(temperature=temperature),
            args.alphas,
            k=args.k,
            p=args.p,
            max_new_tokens=args.max_new_tokens,
            stride=args.stride,
        )
        print(f"\nT = {temperature}: {tuning.positions} positions, {time.perf_counter() - start:.0f} s")
        print(tuning.table(), flush=True)
        results.append({"temperature": temperature, "k": args.k, "horizon": heads.horizon, **tuning.to_json()})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
