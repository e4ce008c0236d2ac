"""An independent, pure-Python exact backoff scorer for ARPA files (test reference).

p(w | h) = p(h w) if "h w" is listed, else bo(h) * p(w | h minus its first word), recursively
(bo = 1 when h is not listed with a backoff). Natural structure: dicts keyed by word tuples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


class ArpaScorer:
    def __init__(self, path: str) -> None:
        self.prob: dict[tuple[str, ...], float] = {}  # log10
        self.backoff: dict[tuple[str, ...], float] = {}  # log10
        self.order = 0
        self.metadata: dict[str, str] = {}
        section = 0
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if section == 0:
                    if line.startswith("#") and ":" in line:
                        key, value = line[1:].split(":", 1)
                        self.metadata[key.strip()] = value.strip()
                    if line.startswith("\\") and line.endswith("-grams:"):
                        section = int(line[1:].split("-")[0])
                        self.order = max(self.order, section)
                    continue
                if not line:
                    continue
                if line.startswith("\\"):
                    if line == "\\end\\":
                        break
                    section = int(line[1:].split("-")[0])
                    self.order = max(self.order, section)
                    continue
                fields = line.split("\t")
                words = tuple(fields[1].split(" "))
                self.prob[words] = float(fields[0])
                if len(fields) > 2:
                    self.backoff[words] = float(fields[2])
        self.vocab = {w[0] for w in self.prob if len(w) == 1}

    def log10_prob(self, history: tuple[str, ...], word: str) -> tuple[float, int]:
        """log10 p(word | history) with exact backoff, and the length of the matched n-gram."""
        history = history[max(0, len(history) - (self.order - 1)) :] if self.order > 1 else ()
        backoff = 0.0
        for start in range(len(history) + 1):
            h = history[start:]
            p = self.prob.get(h + (word,))
            if p is not None:
                return backoff + p, len(h) + 1
            backoff += self.backoff.get(h, 0.0)
        raise KeyError(word)

    def sentence_log10(self, words: Iterable[str]) -> tuple[float, int, int]:
        """(total log10 prob with </s>, scored tokens, OOVs skipped) as ngramperplexity does:
        OOVs are neither scored nor counted, and the context restarts after one."""
        total, n, oov = 0.0, 0, 0
        history: tuple[str, ...] = ("<s>",)
        for w in list(words) + ["</s>"]:
            if w not in self.vocab:
                oov += 1
                history = ()
                continue
            lp, _ = self.log10_prob(history, w)
            total += lp
            n += 1
            history = history + (w,)
        return total, n, oov


def perplexity(scorer: ArpaScorer, lines: Iterable[list[str]]) -> tuple[float, int, int]:
    total, n, oov = 0.0, 0, 0
    for words in lines:
        if not words:
            continue
        t, k, o = scorer.sentence_log10(words)
        total += t
        n += k
        oov += o
    return 10 ** (-total / n), n, oov


def ln(x: float) -> float:
    return x * math.log(10)
