"""Inputs a user or an attacker can give the core: masked logits, huge requests, arrays that
change while the core reads them (issue 15). Each is correct or a clear ValueError."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import draftlattice as dl

ARPA_DIR = Path(__file__).resolve().parents[1] / "tools" / "fuzz" / "corpus" / "arpa"


@pytest.fixture(scope="module")
def lm():
    return dl.NgramLM(str(ARPA_DIR / "katz3.arpa"))


def test_minus_inf_logits_are_masked_tokens():
    logits = np.array([[0.0, -np.inf, 1.0, 2.0, -np.inf], [-np.inf, 3.0, -np.inf, -np.inf, 0.0]], np.float32)
    lattice = dl.Lattice.from_logits(logits, 2)
    assert lattice.tokens.tolist() == [[3, 2], [1, 4]]
    finite = np.log(np.exp(logits[1][[1, 4]]).sum())
    assert lattice.logprobs[1].tolist() == pytest.approx([3.0 - finite, 0.0 - finite], abs=1e-6)
    with pytest.raises(ValueError, match="head 1 has 2 tokens with a logit above -inf, fewer than k=3"):
        dl.Lattice.from_logits(logits, 3)
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="finite or -inf"):
            dl.Lattice.from_logits(np.array([[0.0, bad]], np.float32), 1)


def test_tiny_temperature_is_argmax_like():
    lattice = dl.Lattice.from_logits(np.array([[0.0, 1.0, 1.0, 2.0]], np.float32), 2, temperature=1e-30)
    assert lattice.tokens.tolist() == [[3, 1]]
    assert np.all(np.isfinite(lattice.logprobs[:, :1])) and lattice.logprobs[0, 0] == 0.0


def test_huge_sample_requests_are_refused_before_allocating(lm):
    lattice = dl.Lattice.from_logits(np.zeros((3, 15), np.float32), 4)
    with pytest.raises(ValueError, match="exceed the limit"):
        dl.sample_drafts(lattice, lm, n=2**31, alpha=0.5, generator=0)
    with pytest.raises(ValueError, match="out of range"):
        dl.rescore(lattice, lm, p=2**70, alpha=0.5)
    with pytest.raises(ValueError, match="p must be <= 16777216"):  # the documented 2^24 cap
        dl.rescore(lattice, lm, p=10**9, alpha=0.5)
    assert len(dl.rescore(lattice, lm, p=2**24, alpha=0.5).tokens) == 4**3  # all k^h drafts


def test_logits_mutated_by_another_thread_while_the_core_reads_them():
    """from_logits works on a private copy (the GIL is released while it selects the top-k)."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(8, 50000)).astype(np.float32)
    stop = threading.Event()

    def scribble():
        noise = np.random.default_rng(1)
        while not stop.is_set():
            logits[:] = noise.normal(size=logits.shape).astype(np.float32)

    writer = threading.Thread(target=scribble)
    writer.start()
    try:
        for _ in range(30):
            lattice = dl.Lattice.from_logits(logits, 16)
            assert np.all(np.diff(lattice.logprobs, axis=1) <= 0)
            assert lattice.tokens.min() >= 0 and lattice.tokens.max() < 50000
    finally:
        stop.set()
        writer.join()


def _arpa(tmp_path, text: str):
    path = tmp_path / "hostile.arpa"
    path.write_text(text)
    return path


def test_arpa_header_counts_are_bounded_by_the_file(tmp_path):
    path = _arpa(tmp_path, "\\data\\\nngram 1=99999999999\n\n\\1-grams:\n-1\ta\n\n\\end\\\n")
    with pytest.raises(dl.FormatError, match="more n-grams than the file's .* bytes can hold"):
        dl.NgramLM(str(path))


def test_a_numeric_word_cannot_size_the_token_map(tmp_path):
    text = "\\data\\\nngram 1=3\n\n\\1-grams:\n-1\t<s>\n-0.5\t</s>\n-0.2\t500000000\n\n\\end\\\n"
    lm = dl.NgramLM(str(_arpa(tmp_path, text)))  # the word is a token id, kept outside the dense table
    assert lm.mapped_words == 1 and lm.token_map_bytes < 1 << 20
    assert dl.NgramLM(str(_arpa(tmp_path, text.replace("500000000", "4000")))).mapped_words == 1
