"""Per-word bounds clamped by the largest context mass (csrc/ngram/context_mass.h).

Every ln p(w | h) the model computes must stay below its word's bound (the rescoring search's
heuristic is admissible only then), checked over every history against the pure-Python backoff
reference; on models with large positive backoffs, where the clamp is what binds, the largest
bound must equal ln max_h sum_w p(w | h) found by brute force; and a normalised Katz model gets
bounds of about 0 instead of the several nats the largest backoffs of every order add."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

import draftlattice as dl
from arpa_writer import all_histories, random_arpa
from draftlattice.ngram.build import build_lm
from lm_helpers import cleaned_wikitext
from ngram_reference import BruteForceLM


def _bounds(lm) -> dict[str, float]:
    return {lm.word(i): float(b) for i, b in enumerate(np.asarray(lm.word_bounds))}


def _histories(words: list[str], order: int):
    """Every history that can matter: up to order - 1 words, with or without <s> first."""
    for h in all_histories(words, order - 1):
        yield list(h)
    for h in all_histories(words, order - 2):
        yield ["<s>", *h]


def _masses_and_check(path) -> list[float]:
    """sum_w p(w | h) per history; asserts every ln p(w | h) <= the word's bound."""
    ref, lm = BruteForceLM(path), dl.NgramLM(path)
    bounds = _bounds(lm)
    predicted = sorted(ref.words - {"<s>"})
    masses = []
    for h in _histories(sorted(ref.words - {"<s>", "</s>"}), ref.order):
        logprobs = [ref.logprob(h, w) for w in predicted]
        for w, lp in zip(predicted, logprobs):
            assert lp <= bounds[w], (path.name, h, w, lp, bounds[w])
        masses.append(sum(math.exp(lp) for lp in logprobs))
    return masses


@pytest.mark.parametrize("seed", range(16))
def test_every_probability_is_below_its_word_bound(tmp_path, seed):
    path = tmp_path / f"m{seed}.arpa"
    random_arpa(path, 1 + seed % 4, seed=700 + seed, n_words=5, consistent=seed % 2 == 0, with_unk=seed % 3 == 0)
    _masses_and_check(path)


def _positive_backoff_arpa(path, order: int, seed: int) -> None:
    """A suffix- and prefix-closed model whose contexts have backoffs of +0.5..+1.5 (log10), far
    from normalised; contexts without a continuation get no backoff."""
    rng = random.Random(seed)
    words = [str(i) for i in range(5)]
    grams = [[(w,) for w in ["<s>", "</s>", *words]]]
    for n in range(2, order + 1):
        lower = set(grams[-1])
        candidates = [g for g in itertools.product(["<s>", *words], *[words] * (n - 2), [*words, "</s>"])]
        grams.append(sorted(g for g in candidates if g[:-1] in lower and g[1:] in lower and rng.random() < 0.4))
    contexts = {g[:-1] for section in grams[1:] for g in section}
    lines = ["\\data\\"] + [f"ngram {n}={len(g)}" for n, g in enumerate(grams, 1)] + [""]
    for n, section in enumerate(grams, 1):
        lines.append(f"\\{n}-grams:")
        for g in section:
            prob = -99.0 if g == ("<s>",) else -rng.uniform(0.05, 2.0)
            fields = [f"{prob:.6f}", " ".join(g)]
            if n < order and g in contexts:
                fields.append(f"{rng.uniform(0.5, 1.5):.6f}")
            lines.append("\t".join(fields))
        lines.append("")
    lines.append("\\end\\")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("order", [2, 3, 4])
@pytest.mark.parametrize("seed", range(3))
def test_the_clamp_is_the_largest_mass_after_any_history(tmp_path, order, seed):
    path = tmp_path / "pos.arpa"
    _positive_backoff_arpa(path, order, seed=order * 10 + seed)
    masses = _masses_and_check(path)
    top = max(_bounds(dl.NgramLM(path)).values())
    # Admissible (checked above); the clamp never exceeds the largest mass by more than Score's
    # float rounding margin (the <s> unigram's -99 log10 sets it).
    assert top <= math.log(max(masses)) + _margin(order)


def _margin(order: int) -> float:
    return 1e-6 * order * (1 + order * 99 * math.log(10)) + 1e-6


@pytest.mark.parametrize("seed", [2, 5])
def test_a_perturbed_katz_model_is_clamped_at_its_largest_mass(tmp_path, seed):
    # A normalised Katz 4-gram of a random corpus, with the continuations of one context scaled
    # by 1.4: the largest mass is then about 1.4, and these two seeds' per-word bounds (the
    # backoffs of every order added) lie above it, so the clamp must equal it.
    rng = random.Random(seed)
    letters = "abcdef"[: 3 + seed % 4]
    lines = [" ".join(rng.choice(letters) for _ in range(rng.randint(1, 7))) for _ in range(60)]
    (tmp_path / "c.txt").write_text("\n".join(lines) + "\n")
    build_lm(tmp_path / "c.txt", 4, out_path=tmp_path / "k.arpa", arpa_digits=12)
    scaled, order, target = [], 0, None
    for line in (tmp_path / "k.arpa").read_text().splitlines():
        fields = line.split("\t")
        if line.startswith("\\") and line.endswith("-grams:"):
            order = int(line[1])
        elif order >= 2 and len(fields) >= 2:
            context = tuple(fields[1].split()[:-1])
            target = target or context
            if context == target:
                fields[0] = f"{float(fields[0]) + math.log10(1.4):.12f}"
        scaled.append("\t".join(fields))
    path = tmp_path / "scaled.arpa"
    path.write_text("\n".join(scaled) + "\n")
    masses = _masses_and_check(path)
    top = max(_bounds(dl.NgramLM(path)).values())
    assert max(masses) > 1.2
    assert math.log(max(masses)) <= top <= math.log(max(masses)) + _margin(4)


def test_a_katz_model_gets_bounds_near_zero(tmp_path):
    corpus = cleaned_wikitext("train", tmp_path, max_lines=2000)
    out = tmp_path / "k4.arpa"
    build_lm(corpus, 4, out_path=out, min_counts=[1, 1, 2, 2], arpa_digits=12)
    bounds = np.asarray(dl.NgramLM(out).word_bounds)
    assert bounds.max() < 5e-3  # normalised: every p(w | h) <= 1 (the margin covers rounding)
    assert dl.NgramLM(out).suffix_closed


def test_a_context_without_continuations_counts_through_its_backoff(tmp_path):
    # "a b" is listed with backoff x10 but continues no listed trigram: p(w | a b) = 10 p(w | b),
    # a mass of about 12 that no record of the n-grams' contexts holds. (A positive backoff of a
    # 1- or 2-gram context makes the builder compute the clamp: it skips models without one.)
    path = tmp_path / "bo.arpa"
    path.write_text(
        "\\data\\\nngram 1=4\nngram 2=2\nngram 3=1\n\n\\1-grams:\n-99\t<s>\n-0.6\t</s>\n-0.5\ta\n-0.5\tb\n\n"
        "\\2-grams:\n-0.3\ta b\t1.0\n-0.2\tb a\n\n\\3-grams:\n-0.1\tb a b\n\n\\end\\\n"
    )
    masses = _masses_and_check(path)
    assert max(masses) > 10
    assert max(_bounds(dl.NgramLM(path)).values()) <= math.log(max(masses)) + _margin(3)
