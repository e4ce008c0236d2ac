"""Shared helpers for the n-gram trainer tests."""

from __future__ import annotations

import random
from pathlib import Path

from draftlattice.assets import data_dir

SHARED = data_dir()
KATZ_REF = SHARED / "katz-reference"
WIKITEXT = SHARED / "wikitext-2"


def parse_arpa(path) -> tuple[dict, list]:
    """{words: (log10 prob, log10 backoff or None)} and the n-grams in file order."""
    entries: dict = {}
    order: list = []
    in_grams = False
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("\\") and line.endswith("-grams:"):
            in_grams = True
            continue
        if not in_grams or not line or line.startswith("\\"):
            continue
        fields = line.split("\t")
        words = tuple(fields[1].split(" "))
        entries[words] = (float(fields[0]), float(fields[2]) if len(fields) > 2 else None)
        order.append(words)
    return entries, order


def cleaned_wikitext(split: str, tmp_path: Path, max_lines: int | None = None) -> Path:
    """WikiText-2 split with line-edge spaces stripped and blank lines dropped (the recipe)."""
    out = tmp_path / f"{split}.txt"
    lines = []
    with open(WIKITEXT / f"{split}.txt", encoding="utf-8") as f:
        for line in f:
            line = line.strip(" \n")
            if line:
                lines.append(line)
                if max_lines and len(lines) >= max_lines:
                    break
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def context_sums(scorer, contexts, vocab) -> list[float]:
    """sum_w p(w | h) over the whole vocabulary (</s> included, <s> excluded) per context."""
    sums = []
    for h in contexts:
        total = 0.0
        for w in vocab:
            if w == "<s>":
                continue
            lp, _ = scorer.log10_prob(h, w)
            total += 10.0**lp
        sums.append(total)
    return sums


def sample_contexts(scorer, k: int, seed: int = 0) -> list[tuple[str, ...]]:
    """Random listed contexts of every order (those with a backoff weight), plus <s>."""
    rng = random.Random(seed)
    contexts = sorted(scorer.backoff)
    picked = rng.sample(contexts, min(k, len(contexts)))
    return [("<s>",)] + picked
