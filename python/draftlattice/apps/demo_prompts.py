"""The demo's fixed prompt set: chat questions (through the chat template) and WikiText-2 raw
test paragraph openings (plain text continued).

Neither kind is drawn from the heads' or the LM's training data: those come from the enwiki
sample (chat instructions over its articles, text openings of its paragraphs) and the model's
answers to them; the held-out accuracy set comes from WikiText-2 raw *valid*.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CHAT_QUESTIONS = (
    "What are the benefits of regular exercise?",
    "Explain how vaccines work.",
    "Write a short poem about the sea.",
    "What is the difference between weather and climate?",
    "How does a computer store information?",
    "Give me a recipe for a simple vegetable soup.",
    "Why is the sky blue?",
    "What should I consider when buying a used car?",
    "Describe the water cycle.",
    "What are some good habits for staying productive?",
    "How do airplanes stay in the air?",
    "Summarize the causes of the French Revolution.",
)


@dataclass(frozen=True)
class DemoPrompt:
    """``kind`` is ``"chat"`` or ``"text"``; ``text`` what the user wrote; ``ids`` the model's input."""

    kind: str
    text: str
    ids: list[int]


def paragraph_openings(path: str | os.PathLike[str], n: int, words: int = 32) -> list[str]:
    """The first ``words`` words of ``n`` paragraphs of a WikiText file, spread over the file
    (paragraphs of at least 2 x ``words`` words; headings skipped). WikiText's tokenization
    (`` @-@ ``, spaces around punctuation) is undone so the model sees ordinary text."""
    paragraphs = [
        line.split()
        for line in Path(path).read_text(encoding="utf-8").splitlines()
        if len(line.split()) >= 2 * words and not line.strip().startswith("=")
    ]
    if len(paragraphs) < n:
        raise ValueError(f"{path}: {len(paragraphs)} paragraphs of >= {2 * words} words, {n} wanted")
    step = len(paragraphs) / n
    return [detokenize(" ".join(paragraphs[int(i * step)][:words])) for i in range(n)]


def detokenize(text: str) -> str:
    """WikiText's spacing back to ordinary text (``a @-@ b`` -> ``a-b``, ``x , y`` -> ``x, y``)."""
    for marked, plain in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", ".")):
        text = text.replace(marked, plain)
    for mark in (" ,", " .", " ;", " :", " )", " 's", " n't", " %"):
        text = text.replace(mark, mark[1:])
    return text.replace("( ", "(").replace(' " ', ' "')


def demo_prompts(
    tokenizer, wikitext_test: str | os.PathLike[str] | None, chat: int = 4, text: int = 4
) -> list[DemoPrompt]:
    """``chat`` questions and ``text`` paragraph openings of ``wikitext_test`` (None: ``text`` must
    be 0), alternating chat and text."""
    if not 0 <= chat <= len(CHAT_QUESTIONS):
        raise ValueError(f"chat prompts must be in [0, {len(CHAT_QUESTIONS)}], got {chat}")
    if chat + text < 1:
        raise ValueError("the demo needs at least one prompt")
    if text and wikitext_test is None:
        raise ValueError(f"{text} text prompts need a WikiText-2 raw test file, got None")
    chats = []
    for question in CHAT_QUESTIONS[:chat]:
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True
        )
        chats.append(DemoPrompt("chat", question, list(ids["input_ids"] if hasattr(ids, "keys") else ids)))
    texts = [
        DemoPrompt("text", opening, list(tokenizer(opening, add_special_tokens=False)["input_ids"]))
        for opening in (paragraph_openings(wikitext_test, text) if text else [])
    ]
    mixed = []
    for i in range(max(len(chats), len(texts))):
        mixed += chats[i : i + 1] + texts[i : i + 1]
    return mixed
