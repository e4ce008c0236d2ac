"""`.dlm` files are written straight from the trainer's model (ngram/build.py, csrc/lmbuild/
to_ngram.h): every probability of `lm build -o x.dlm` is the trainer's in-memory value rounded
once to the engine's float32, bit for bit; the 7-digit ARPA text route is not."""

from __future__ import annotations

import numpy as np
import pytest

import draftlattice as dl
from draftlattice import _core
from draftlattice.cli.main import main
from draftlattice.ngram.build import build_lm
from lm_helpers import KATZ_REF, cleaned_wikitext


def trainer_model(corpus, order, min_counts=None, prune_threshold=None):
    """The model build_lm estimates, kept in memory (same steps, same inputs)."""
    counter = _core.NgramCounter(order)
    counter.add_text(corpus.read_bytes())
    model = _core.estimate_katz(counter, min_counts)
    if prune_threshold is not None:
        model.prune(threshold=prune_threshold)
    return model


def stored_mismatches(lm: dl.NgramLM, model) -> tuple[int, int]:
    """(n-grams whose LM score differs from float32(the trainer's ln p), n-grams compared).

    Token id i is the trainer's word i (vocab=model.words()). Scoring a listed n-gram after its
    own context returns its stored probability: the state keeps the whole context (a prefix of a
    listed n-gram is a context), so no backoff is added.
    """
    bad = total = 0
    for order in range(1, model.order + 1):
        ids, prob_ln, _ = model.ngrams(order)
        for row, want in zip(ids, prob_ln):
            if order == 1 and row[0] == 0:  # <s>: never predicted
                continue
            got = lm.token_scores(row[-1:], context=row[:-1])[0]
            bad += got != float(np.float32(want))
            total += 1
    return bad, total


@pytest.mark.parametrize("order,min_counts,prune_threshold", [(3, None, None), (4, [1, 1, 2, 2], 1e-6)])
def test_dlm_probabilities_equal_the_trainers_bit_for_bit(tmp_path, order, min_counts, prune_threshold):
    corpus = cleaned_wikitext("train", tmp_path, max_lines=3000) if order == 4 else KATZ_REF / "corpus.txt"
    model = trainer_model(corpus, order, min_counts, prune_threshold)
    out = tmp_path / "x.dlm"
    build_lm(corpus, order, out_path=out, min_counts=min_counts, prune_threshold=prune_threshold)
    lm = dl.NgramLM(out, vocab=model.words())
    assert lm.source_format == "binary" and list(lm.counts) == list(model.counts())
    bad, total = stored_mismatches(lm, model)
    assert total > 1000 if order == 4 else total > 10
    assert bad == 0, f"{bad} of {total} probabilities differ from the trainer's"
    # The ARPA route (7 significant log10 digits, then back to ln) loses that exactness.
    arpa = tmp_path / "x.arpa"
    build_lm(corpus, order, out_path=arpa, min_counts=min_counts, prune_threshold=prune_threshold)
    arpa_bad, _ = stored_mismatches(dl.NgramLM(arpa, vocab=model.words()), model)
    assert arpa_bad > 0


def test_cli_lm_build_dlm_equals_the_trainer(tmp_path):
    corpus = KATZ_REF / "corpus.txt"
    out = tmp_path / "cli.dlm"
    assert main(["lm", "build", str(corpus), "--order", "3", "-o", str(out)]) == 0
    model = trainer_model(corpus, 3)
    bad, total = stored_mismatches(dl.NgramLM(out, vocab=model.words()), model)
    assert total > 10 and bad == 0


def test_file_errors_are_oserrors_content_errors_format_errors(tmp_path):
    """One hierarchy from C++ to Python: files -> OSError subclasses by errno, content ->
    FormatError (a ValueError)."""
    model = trainer_model(KATZ_REF / "corpus.txt", 2)
    with pytest.raises(FileNotFoundError, match="cannot write"):
        model.write_arpa(str(tmp_path / "absent" / "x.arpa"))
    out = tmp_path / "x.dlm"
    model.write_binary(str(out))
    with pytest.raises(FileExistsError, match="file exists"):
        model.write_binary(str(out))
    bad = tmp_path / "bad.arpa"
    bad.write_text("\\data\\\nngram 1=x\n", encoding="utf-8")
    with pytest.raises(dl.FormatError, match="bad.arpa:2"):
        dl.NgramLM(bad)
    assert issubclass(dl.FormatError, ValueError)
