"""Exact draft sampling: conditionals and partition function against enumeration of all drafts
(scored by the pure-Python backoff reference), a fixed-seed chi-square check, batch = singles."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

import draftlattice as dl
from arpa_writer import random_arpa
from draftlattice.sample import sample_from_heads
from ngram_reference import BruteForceLM


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("arpa")
    out = []
    for seed, order in enumerate((2, 3, 4, 5)):
        path = base / f"s{seed}.arpa"
        random_arpa(path, order, seed=40 + seed, n_words=6, consistent=seed % 2 == 0, with_unk=seed == 1)
        out.append((dl.NgramLM(path, oov_logprob=-6.0), BruteForceLM(path, oov_ln=-6.0)))
    return out


def totals(lattice, reference, context, alpha, bos):
    """{rank tuple: total} over all k**h drafts, scored by the independent reference."""
    out = {}
    for ranks in itertools.product(range(lattice.k), repeat=lattice.h):
        words = [str(lattice.tokens[t, r]) for t, r in enumerate(ranks)]
        lm = sum(reference.sentence(words, [str(c) for c in context], bos))
        out[ranks] = sum(float(lattice.logprobs[t, r]) for t, r in enumerate(ranks)) + alpha * lm
    return out


def random_lattice(rng, h, k):
    tokens = np.array([rng.sample(range(8), k) for _ in range(h)], dtype=np.int32)
    logprobs = np.array([[-rng.expovariate(0.8) for _ in range(k)] for _ in range(h)], np.float32)
    return dl.Lattice.from_topk(tokens, logprobs)


def test_conditionals_equal_enumeration(models):
    rng = random.Random(2)
    for lm, reference in models:
        for _ in range(6):
            h, k = rng.randint(1, 4), rng.randint(1, 4)
            lattice = random_lattice(rng, h, k)
            context = [rng.randrange(8) for _ in range(rng.randint(0, 4))]
            alpha, bos = rng.choice([0.0, 0.5, 1.0]), rng.random() < 0.5
            table = totals(lattice, reference, context, alpha, bos)
            log_z = np.logaddexp.reduce(np.array(list(table.values())))
            samples = dl.sample_drafts(
                lattice, lm, n=40, alpha=alpha, context=context, bos=bos, generator=rng.randrange(2**64)
            )
            assert samples.tokens.shape == (40, h) and samples.q.shape == (40, h, k)
            assert abs(samples.log_z - log_z) < 1e-5
            np.testing.assert_allclose(samples.q.sum(axis=2), 1.0, atol=1e-12)
            for i in range(40):
                ranks = tuple(int(np.flatnonzero(lattice.tokens[t] == samples.tokens[i, t])[0]) for t in range(h))
                assert abs(samples.logprobs[i] - (table[ranks] - log_z)) < 1e-5
                for t in range(h):  # q[i, t] = P(prefix + r) / P(prefix), by marginalisation
                    mass = np.array(
                        [
                            np.logaddexp.reduce([v for key, v in table.items() if key[:t] == ranks[:t] and key[t] == r])
                            for r in range(k)
                        ]
                    )
                    np.testing.assert_allclose(
                        samples.q[i, t], np.exp(mass - np.logaddexp.reduce(mass)), rtol=1e-5, atol=1e-7
                    )  # LM scores are float32


def test_product_of_conditionals_is_the_distribution_for_every_path(models):
    """Sampling enough draws visits every path of a tiny lattice; each path's q product = P."""
    lm, reference = models[2]
    lattice = random_lattice(random.Random(9), 3, 2)
    table = totals(lattice, reference, [1, 2], 1.0, False)
    log_z = np.logaddexp.reduce(np.array(list(table.values())))
    samples = dl.sample_drafts(lattice, lm, n=3000, alpha=1.0, context=[1, 2], generator=123)
    seen = {}
    for i in range(samples.tokens.shape[0]):
        ranks = tuple(int(np.flatnonzero(lattice.tokens[t] == samples.tokens[i, t])[0]) for t in range(3))
        product = sum(math.log(samples.q[i, t, r]) for t, r in enumerate(ranks))
        seen[ranks] = product
    assert set(seen) == set(table)
    for ranks, product in seen.items():
        assert abs(product - (table[ranks] - log_z)) < 1e-5


def test_chi_square_with_fixed_seed(models):
    lm, reference = models[1]
    lattice = random_lattice(random.Random(4), 3, 3)
    table = totals(lattice, reference, [0], 0.8, True)
    keys = sorted(table)
    log_z = np.logaddexp.reduce(np.array([table[key] for key in keys]))
    expected_p = np.exp(np.array([table[key] for key in keys]) - log_z)
    n = 20000
    samples = dl.sample_drafts(
        lattice, lm, n=n, alpha=0.8, context=[0], bos=True, generator=np.random.default_rng(2024)
    )
    index = {tuple(int(lattice.tokens[t, r]) for t, r in enumerate(key)): i for i, key in enumerate(keys)}
    counts = np.bincount([index[tuple(d)] for d in samples.tokens.tolist()], minlength=len(keys))
    statistic, pvalue = chisquare(counts, expected_p * n)
    assert pvalue > 1e-3, (statistic, pvalue)


def test_seeds_are_deterministic_and_batch_equals_singles(models):
    lm, _ = models[3]
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(5, 3, 8)).astype(np.float32)
    contexts = [rng.integers(0, 8, size=2) for _ in range(5)]
    for threads in (1, 2):
        batch = dl.sample_drafts_batch(
            logits, lm, contexts, n=7, alpha=0.5, k=3, generator=torch.Generator().manual_seed(3), num_threads=threads
        )
        generator = torch.Generator().manual_seed(3)
        for b in range(5):
            single = dl.sample_drafts(
                dl.Lattice.from_logits(logits[b], 3), lm, n=7, alpha=0.5, context=contexts[b], generator=generator
            )
            np.testing.assert_array_equal(batch[b].tokens, single.tokens)
            np.testing.assert_array_equal(batch[b].q, single.q)
    lattice = dl.Lattice.from_logits(logits[0], 3)
    a = dl.sample_drafts(lattice, lm, n=50, generator=99)
    b = dl.sample_drafts(lattice, lm, n=50, generator=99)
    np.testing.assert_array_equal(a.tokens, b.tokens)


def test_bad_inputs_raise(models):
    lm, _ = models[0]
    lattice = random_lattice(random.Random(0), 2, 2)
    with pytest.raises(TypeError, match="n must be an integer"):  # a wrong type, as for rescore's p
        dl.sample_drafts(lattice, lm, n=1.5)
    for kwargs, words in [
        ({"n": -1}, "number of samples"),
        ({"alpha": -1.0}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"generator": "x"}, "generator"),
        ({"generator": -5}, "seed"),
        ({"context": [-1]}, "-1"),
    ]:
        with pytest.raises(ValueError, match=words):
            dl.sample_drafts(lattice, lm, **kwargs)
    with pytest.raises(ValueError, match="contexts"):
        dl.sample_drafts_batch([lattice, lattice], lm, [[1]])


def test_an_lm_state_start_equals_the_context_it_stands_for(models):
    """sample_drafts / sample_from_heads from lm.start(context, bos): the same draws and q as
    from the token context (with and without the "other" arcs); a foreign state is refused."""
    rng = random.Random(9)
    for lm, _ in models:
        for _ in range(5):
            lattice = random_lattice(rng, rng.randint(1, 4), rng.randint(1, 4))
            context = [rng.randrange(8) for _ in range(rng.randint(0, 5))]
            bos, seed = rng.random() < 0.5, rng.randrange(2**64)
            other = None if rng.random() < 0.5 else np.log(np.full(lattice.h, 0.3))
            a = dl.sample_drafts(lattice, lm, 20, 0.7, context, bos, seed, other)
            b = dl.sample_drafts(lattice, lm, 20, 0.7, lm.start(context, bos), False, seed, other)
            np.testing.assert_array_equal(a.tokens, b.tokens)
            np.testing.assert_array_equal(a.q, b.q)
            heads = np.log(np.random.default_rng(seed % 2**32).dirichlet(np.ones(8), size=3))
            c = sample_from_heads(heads, 3, lm, 5, 0.4, context, bos, seed)
            d = sample_from_heads(heads, 3, lm, 5, 0.4, lm.start(context, bos), False, seed)
            np.testing.assert_array_equal(c.tokens, d.tokens)
            np.testing.assert_array_equal(c.q, d.q)
    lattice = random_lattice(rng, 2, 2)
    with pytest.raises(ValueError, match="bos=True applies to token contexts"):
        dl.sample_drafts(lattice, models[0][0], 1, 0.5, models[0][0].start([1]), True)
    with pytest.raises(ValueError, match="state"):
        dl.sample_drafts(lattice, models[0][0], 1, 0.5, models[3][0].start([1, 2, 3, 4]))
