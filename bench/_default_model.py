"""What the benchmarks on the default model share: the bundle on the CPU threads asked for, and
one of two prompt sets (the demo's chat and text prompts, or WikiText-2 test paragraph openings)."""

from __future__ import annotations

import torch


def add_demo_set_arguments(parser) -> None:
    """The options of :func:`demo_set` and of how long and how often its prompts are decoded."""
    parser.add_argument("--chat", type=int, default=4)
    parser.add_argument("--text", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)


def demo_set(chat: int, text: int, dtype: torch.dtype, threads: int):
    """``(bundle, prompts)``: the default model and the demo's prompt set (:class:`DemoPrompt`s:
    chat questions through the chat template, WikiText-2 raw test openings)."""
    from draftlattice.apps.demo_prompts import demo_prompts
    from draftlattice.assets import WIKITEXT_RAW_TEST, data_file
    from draftlattice.default_model import load_default

    torch.set_num_threads(threads)
    bundle = load_default(dtype)
    return bundle, demo_prompts(bundle.tokenizer, data_file(WIKITEXT_RAW_TEST), chat=chat, text=text)


def paragraph_set(count: int, dtype: torch.dtype, threads: int, length: int = 32):
    """``(bundle, prompts)``: the default model and the first ``length`` tokens of ``count``
    WikiText-2 test paragraphs (token id lists)."""
    from draftlattice.assets import WIKITEXT_TEST, data_file
    from draftlattice.default_model import load_default
    from draftlattice.evaluate.prompts import paragraph_prompts
    from draftlattice.tokenizer import load_tokenizer

    torch.set_num_threads(threads)
    bundle = load_default(dtype)
    tokenizer = load_tokenizer(bundle.folder / "tokenizer.json")
    return bundle, paragraph_prompts(data_file(WIKITEXT_TEST), tokenizer, count, length)
