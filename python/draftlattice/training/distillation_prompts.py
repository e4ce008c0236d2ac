"""Prompts for self-distillation: chat questions and text openings drawn from an English corpus.

Draft heads accept well where they have learnt what the model itself writes, on the kinds of
prompt it will be given. :func:`distillation_prompts` draws a mix from a WikiExtractor dump (the
shared data's enwiki sample) or any text with one paragraph per line:

* ``"chat"``: a question about an article's title or an instruction over one of its paragraphs,
  sent through the model's chat template;
* ``"text"``: the opening words of a paragraph, continued as plain text.

The draw is deterministic for a seed. The demo's and the held-out evaluation's prompts come from
other data (WikiText-2 raw test and valid, a fixed question list), never from this draw.
"""

from __future__ import annotations

import lzma
import os
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TITLE_QUESTIONS = (
    "Tell me about {title}.",
    "What is {title}?",
    "Write a short paragraph about {title}.",
    "Give me three facts about {title}.",
    "Explain {title} to a high school student.",
    "Why is {title} notable?",
    "Write a short encyclopedia entry about {title}.",
    "What should I know about {title}?",
)
PASSAGE_INSTRUCTIONS = (
    "Summarize this passage:\n\n{text}",
    "Explain the main idea of this text:\n\n{text}",
    "What questions does this passage raise?\n\n{text}",
    "Rewrite this in simple English:\n\n{text}",
    "List the key facts in this text:\n\n{text}",
    "Continue this text:\n\n{text}",
)
GENERAL_QUESTIONS = (
    "How do I {task}?",
    "Give me some tips to {task}.",
    "What is the best way to {task}?",
    "Explain step by step how to {task}.",
)
TASKS = (
    "learn a new language",
    "write a good essay",
    "improve my sleep",
    "cook rice",
    "save money",
    "prepare for a job interview",
    "start running",
    "learn to program in Python",
    "plant a garden",
    "study for an exam",
    "write a cover letter",
    "stay focused while working",
    "make friends in a new city",
    "reduce stress",
    "bake bread",
    "take better photos",
    "organize my time",
    "read more books",
    "give a presentation",
    "train a dog",
    "write a poem",
    "learn to play the guitar",
    "eat healthier",
    "fix a flat bicycle tire",
    "choose a laptop",
    "plan a trip",
    "write a short story",
    "memorize facts",
)

_DOC_START = re.compile(r'<doc id="[^"]*" url="[^"]*" title="([^"]*)">')


@dataclass(frozen=True)
class Prompt:
    """One distillation prompt: ``kind`` is ``"chat"`` (a user message) or ``"text"`` (raw text)."""

    kind: str
    text: str


def _open_text(path: Path):
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def articles(path: str | os.PathLike[str]) -> Iterator[tuple[str, list[str]]]:
    """``(title, paragraphs)`` of a WikiExtractor file; other text: one untitled paragraph a line."""
    path = Path(path)
    title, paragraphs = "", []
    with _open_text(path) as f:
        for line in f:
            line = line.strip()
            match = _DOC_START.match(line)
            if match:
                title, paragraphs = match.group(1), []
            elif line == "</doc>":
                yield title, paragraphs
                title, paragraphs = "", []
            elif len(line.split()) >= 20 and not line.startswith("="):
                if title:
                    paragraphs.append(line)
                else:
                    yield "", [line]


def _opening(paragraph: str, rng: random.Random) -> str:
    words = paragraph.split()
    return " ".join(words[: rng.randint(8, 40)])


def _passage(paragraph: str) -> str:
    return " ".join(paragraph.split()[:120])


def distillation_prompts(path: str | os.PathLike[str], n: int, seed: int = 0, chat_share: float = 0.75) -> list[Prompt]:
    """``n`` prompts (a ``chat_share`` of chat messages, the rest text openings) from ``path``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0.0 <= chat_share <= 1.0:
        raise ValueError(f"chat_share must be in [0, 1], got {chat_share}")
    rng = random.Random(seed)
    docs = [(title, paragraphs) for title, paragraphs in articles(path) if paragraphs]
    if not docs:
        raise ValueError(f"{path}: no paragraphs of 20 words or more")
    prompts: list[Prompt] = []
    while len(prompts) < n:
        title, paragraphs = docs[rng.randrange(len(docs))]
        paragraph = paragraphs[rng.randrange(len(paragraphs))]
        if rng.random() >= chat_share:
            prompts.append(Prompt("text", _opening(paragraph, rng)))
            continue
        pick = rng.random()
        if title and pick < 0.4:
            prompts.append(Prompt("chat", rng.choice(TITLE_QUESTIONS).format(title=title)))
        elif pick < 0.9:
            prompts.append(Prompt("chat", rng.choice(PASSAGE_INSTRUCTIONS).format(text=_passage(paragraph))))
        else:
            prompts.append(Prompt("chat", rng.choice(GENERAL_QUESTIONS).format(task=rng.choice(TASKS))))
    return prompts


def encode_prompt(tokenizer, prompt: Prompt) -> list[int]:
    """Token ids of ``prompt``: chat messages through the tokenizer's chat template."""
    if prompt.kind == "chat":
        messages = [{"role": "user", "content": prompt.text}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(t) for t in ids]
    if prompt.kind == "text":
        return [int(t) for t in tokenizer(prompt.text, add_special_tokens=False)["input_ids"]]
    raise ValueError(f"prompt kind must be 'chat' or 'text', got {prompt.kind!r}")
