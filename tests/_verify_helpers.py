"""Helpers shared by the verifier tests (tiny random models, random distributions)."""

from __future__ import annotations

import random

import torch


def tiny_llama(seed: int = 0, vocab: int = 48):
    """A tiny randomly initialised Llama (float64, eager attention); nothing is downloaded."""
    from _hf_models import llama

    return llama(vocab, seed, initializer_range=0.3, attn_implementation="eager").to(torch.float64).eval()


@torch.no_grad()
def greedy_reference(model, prompt: list[int], n_new: int) -> list[int]:
    """Plain greedy decoding, a full forward per token (no cache)."""
    ids = list(prompt)
    for _ in range(n_new):
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        ids.append(int(logits.argmax()))
    return ids


def make_drafts(rng: random.Random, truth: list[int], p: int, h: int, vocab: int) -> torch.Tensor:
    """p drafts of length h around the true continuation: corrupted copies (sharing prefixes),
    duplicates and random drafts."""
    drafts = []
    for _ in range(p):
        kind = rng.random()
        if kind < 0.15 or not drafts:
            base = list(truth[:h])
        elif kind < 0.3:
            base = list(drafts[rng.randrange(len(drafts))])  # duplicate / shared prefix
        elif kind < 0.4:
            base = [rng.randrange(vocab) for _ in range(h)]
        else:
            base = list(truth[:h])
        cut = rng.randrange(h + 1)
        for j in range(cut, h):
            if rng.random() < 0.7:
                t = rng.randrange(vocab)
                base[j] = t if t != truth[j] else (t + 1) % vocab
        drafts.append(base)
    return torch.tensor(drafts, dtype=torch.int64)


def random_dist(rng: random.Random, V: int, zero_prob: float = 0.3) -> list[float]:
    """A random distribution over V tokens with some exact zeros (at least one non-zero)."""
    while True:
        x = [0.0 if rng.random() < zero_prob else rng.random() + 0.05 for _ in range(V)]
        s = sum(x)
        if s > 0:
            return [v / s for v in x]


class ContextModel:
    """Random context-dependent target p(. | s) and drafter q(. | s) over a small vocabulary,
    with zeros in both and q = p at some prefixes (memoised so they are consistent)."""

    def __init__(self, V: int, seed: int, same_prob: float = 0.25):
        self.V, self.seed, self.same_prob = V, seed, same_prob
        self._p: dict[tuple, list[float]] = {}
        self._q: dict[tuple, list[float]] = {}

    def _rng(self, s: tuple, tag: str) -> random.Random:
        return random.Random(f"{self.seed}:{tag}:{s}")

    def p(self, s: tuple) -> list[float]:
        if s not in self._p:
            self._p[s] = random_dist(self._rng(s, "p"), self.V)
        return self._p[s]

    def q(self, s: tuple) -> list[float]:
        if s not in self._q:
            rng = self._rng(s, "q")
            self._q[s] = list(self.p(s)) if rng.random() < self.same_prob else random_dist(rng, self.V)
        return self._q[s]
