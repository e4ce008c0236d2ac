"""Random ARPA models for tests: consistent or inconsistently pruned, orders 1..8; skewed ones with
blank bigrams (skewed_arpa)."""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path


def random_arpa(
    path: Path,
    order: int,
    seed: int,
    n_words: int = 6,
    consistent: bool = True,
    with_unk: bool = False,
    metadata: dict[str, str] | None = None,
) -> list[str]:
    """Writes a random ARPA model whose words are decimal token ids "0".."n_words-1" plus <s>,
    </s> (and <unk>). Inconsistent models list n-grams whose prefixes/suffixes are missing, omit
    backoff fields and use zero or positive backoffs. Returns the regular words."""
    rng = random.Random(seed)
    words = [str(i) for i in range(n_words)]
    unigrams = ["<s>", "</s>"] + words + (["<unk>"] if with_unk else [])
    grams: list[list[tuple[str, ...]]] = [[(w,) for w in unigrams]]
    for n in range(2, order + 1):
        chosen: set[tuple[str, ...]] = set()
        target = rng.randint(3, 12 * n)
        for _ in range(target * 3):
            first = rng.choice(["<s>"] + words + words)
            middle = tuple(rng.choice(words) for _ in range(n - 2))
            last = rng.choice(words + ["</s>"])
            gram = (first,) + middle + (last,)
            if consistent:
                # every prefix and suffix of a listed n-gram is listed
                if gram[:-1] not in set(grams[n - 2]) or gram[1:] not in set(grams[n - 2]):
                    continue
            chosen.add(gram)
            if len(chosen) >= target:
                break
        grams.append(sorted(chosen))

    lines = [f"# {k}: {v}" for k, v in (metadata or {}).items()]
    lines += ["", "\\data\\"] + [f"ngram {n}={len(g)}" for n, g in enumerate(grams, 1)] + [""]
    for n, section in enumerate(grams, 1):
        lines.append(f"\\{n}-grams:")
        for gram in section:
            prob = -99.0 if gram == ("<s>",) else -rng.uniform(0.05, 2.5)
            fields = [f"{prob:.6f}", " ".join(gram)]
            if n < order:
                roll = rng.random()
                if consistent or roll < 0.6:
                    fields.append(f"{-rng.uniform(0.0, 1.0):.6f}")
                elif roll < 0.75:
                    fields.append("0")
                elif roll < 0.85:
                    fields.append(f"{rng.uniform(0.0, 0.5):.6f}")
            lines.append("\t".join(fields))
        lines.append("")
    lines.append("\\end\\")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return words


def rewrite_backoffs(path: Path, seed: int, low: float, high: float) -> None:
    """Rewrites every backoff of an ARPA file to a random log10 value in [low, high], keeping the
    n-grams (positive values: backoff weights above 1, as pruned Katz models have)."""
    rng = random.Random(seed)
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        fields = line.split("\t")
        if len(fields) == 3:  # prob, n-gram, backoff
            fields[2] = f"{rng.uniform(low, high):.6f}"
            lines[i] = "\t".join(fields)
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def all_histories(words: list[str], max_len: int):
    for n in range(max_len + 1):
        yield from itertools.product(words, repeat=n)


def skewed_arpa(path: Path, order: int, seed: int) -> int:
    """Writes a suffix-closed ARPA model whose longer n-grams are far likelier than their bigram
    suffixes (log10 -0.4..-0.05 against -2.5..-1.5) and in which some bigrams are blank (deleted,
    but kept as the prefix of a listed trigram; order >= 3): the search's pair bounds must keep
    every longer n-gram ending in "v w", and for a blank "v w" also the backoff path. Words as
    random_arpa's (6 of them); returns the number of blank bigrams."""
    rng = random.Random(seed)
    random_arpa(path, order, seed, n_words=6, consistent=True)
    lines = path.read_text(encoding="utf-8").splitlines()
    grams = [line.split("\t") for line in lines]
    trigram_prefixes = {tuple(f[1].split()[:2]) for f in grams if len(f) >= 2 and len(f[1].split()) == 3}
    kept, blanks = [], 0
    for line, fields in zip(lines, grams):
        n = len(fields[1].split()) if len(fields) >= 2 else 0
        if n == 2 and tuple(fields[1].split()) in trigram_prefixes and rng.random() < 0.4:
            blanks += 1
            continue
        if n >= 2:
            fields[0] = f"{rng.uniform(-2.5, -1.5) if n == 2 else rng.uniform(-0.4, -0.05):.6f}"
            line = "\t".join(fields)
        kept.append(line)
    text = "\n".join(kept) + "\n"
    bigrams = sum(1 for line in kept if len(line.split("\t")) >= 2 and len(line.split("\t")[1].split()) == 2)
    text = re.sub(r"ngram 2=\d+", f"ngram 2={bigrams}", text)
    path.write_text(text, encoding="utf-8")
    return blanks
