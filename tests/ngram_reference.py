"""Independent brute-force reference for backoff n-gram scoring, used by the tests.

Reads an ARPA file into dicts keyed by word tuples and applies the Katz backoff formula
literally over the full history: log p(w|h) = log p(w|h_j) + sum of bo(h_i) for i > j, where
h_j is the longest suffix of h with (h_j, w) listed. Natural log; no states, no hashing.
"""

from __future__ import annotations

import math

LN10 = math.log(10.0)


def read_arpa(path) -> tuple[int, dict, dict]:
    probs: dict[tuple[str, ...], float] = {}
    backoffs: dict[tuple[str, ...], float] = {}
    order = 0
    section = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            if line.startswith("ngram ") and section == 0:
                order = max(order, int(line[6:].split("=")[0]))
                continue
            if line.startswith("\\") and line.endswith("-grams:"):
                section = int(line[1:].split("-")[0])
                continue
            if line.startswith("\\") or section == 0:
                continue
            fields = line.split()
            words = tuple(fields[1 : 1 + section])
            probs[words] = float(fields[0]) * LN10
            if len(fields) == section + 2:
                backoffs[words] = float(fields[-1]) * LN10
    return order, probs, backoffs


class BruteForceLM:
    def __init__(self, path, oov_ln: float = -1000.0):
        self.order, self.probs, self.backoffs = read_arpa(path)
        self.words = {w[0] for w in self.probs if len(w) == 1}
        self.oov_ln = oov_ln

    def logprob(self, history: list[str], word: str) -> float:
        """history: chronological words (None = unknown word without <unk>)."""
        if word not in self.words:
            if "<unk>" not in self.words:
                return self.oov_ln
            word = "<unk>"
        history = ["<unk>" if (w not in self.words and "<unk>" in self.words) else w for w in history]
        # An unknown word without <unk> cuts the history.
        for i in range(len(history) - 1, -1, -1):
            if history[i] not in self.words:
                history = history[i + 1 :]
                break
        history = history[-(self.order - 1) :] if self.order > 1 else []
        best = None
        for j in range(len(history), -1, -1):
            key = tuple(history[len(history) - j :]) + (word,)
            if key in self.probs:
                best = j
                break
        total = self.probs[tuple(history[len(history) - best :]) + (word,)]
        for i in range(best + 1, len(history) + 1):
            total += self.backoffs.get(tuple(history[len(history) - i :]), 0.0)
        return total

    def sentence(self, words: list[str], context=(), bos=False, eos=False) -> list[float]:
        history = (["<s>"] if bos else []) + list(context)
        scores = []
        for w in list(words) + (["</s>"] if eos else []):
            scores.append(self.logprob(history, w))
            history.append(w)
        return scores
