"""The demo's arguments checked before anything is fetched or loaded (and what can only be
checked once the model is loaded: its context)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def check_arguments(args: argparse.Namespace, data: Path | None) -> None:
    """What DemoSettings and load_default do not check, before anything is fetched or loaded."""
    from ..apps.demo_prompts import CHAT_QUESTIONS
    from ._checks import at_least

    at_least("--chat", args.chat, 0)
    at_least("--text", args.text, 0)
    if args.chat + args.text < 1:
        raise ValueError("--chat 0 --text 0: no prompt to decode")
    if args.chat > len(CHAT_QUESTIONS):
        raise ValueError(f"--chat {args.chat}: the demo has {len(CHAT_QUESTIONS)} chat questions")
    at_least("--threads", args.threads, 1)
    if args.p is not None and args.nodes is not None:
        raise ValueError("--p and --nodes both choose the tree rows' tree (p best drafts, or best prefixes): pass one")
    if data is not None and not data.is_file():
        raise FileNotFoundError(f"{data}: no such file (--data: WikiText-2 raw test.txt)")


def heads_vocab_size(models: Path | None) -> int:
    """The shipped heads' vocabulary (the model's), from their config: known before loading."""
    from ..default_model.load import HEADS, artifacts_dir

    return int(json.loads((artifacts_dir(models) / HEADS / "config.json").read_text())["vocab_size"])


def check_context(config, prompts, max_new_tokens: int) -> None:
    """The longest prompt and its new tokens must fit the model's context (known once loaded)."""
    from .trace import context_of

    context = context_of(config)
    longest = max(len(prompt.ids) for prompt in prompts)
    if context is not None and longest + max_new_tokens > context:
        raise ValueError(
            f"--max-new-tokens {max_new_tokens}: a {longest}-token prompt and its new tokens exceed the model's "
            f"context of {context} tokens"
        )


def wikitext(args: argparse.Namespace) -> Path | None:
    """The WikiText-2 raw test file the text prompts come from: --data, else the shared data
    directory's; None with --text 0 (chat prompts only, no data needed)."""
    from ..assets import WIKITEXT_RAW_TEST, AssetNotFoundError, data_file

    if args.data is not None or args.text == 0:
        return args.data
    try:
        return data_file(WIKITEXT_RAW_TEST)
    except AssetNotFoundError as error:
        raise AssetNotFoundError(
            f"{error}; the text prompts need WikiText-2 raw test.txt: pass --data FILE, or --text 0 for chat prompts only"
        ) from None
