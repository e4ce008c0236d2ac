"""draftlattice.evaluate.perplexity and `draftlattice model perplexity`, against direct computation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import draftlattice.hf as dlhf
from _hf_models import fetched_default_model, llama
from _tiny_target import tiny_target
from draftlattice.cli.main import main
from draftlattice.evaluate.perplexity import (
    _stream,
    _windows,
    documents,
    end_of_text_id,
    lm_perplexity,
    target_perplexity,
)

EOS = 0
VOCAB = 24

pytestmark = pytest.mark.usefixtures("one_thread")


def model_and_heads(horizon: int, seed: int = 0):
    """A tiny Llama and heads 2..h perturbed away from head 1 (random, so they draft differently)."""
    model = llama(VOCAB, seed=seed)
    heads = dlhf.DraftHeads.for_model(model, horizon=horizon)
    torch.manual_seed(seed)
    for param in heads.parameters():
        torch.nn.init.normal_(param, std=0.3)
    return model, heads.eval()


def direct(model, heads, docs, h):
    """Full-context log-likelihood (the model's own forward) and head accuracies of the whole
    stream in one forward."""
    stream = _stream(docs, EOS)
    with torch.inference_mode():
        head1 = model(stream[None, :-1]).logits[0]  # [n-1, V]
        hidden = model.model(stream[None, :-1]).last_hidden_state[0]
        others = heads.logits(hidden, model)  # [n-1, h-1, V]
    logp = head1.log_softmax(-1).gather(-1, stream[1:, None])
    n = stream.numel()
    accuracy = []
    for j in range(1, h):
        positions = torch.arange(0, n - 1 - j)
        accuracy.append(float((others[positions, j - 1].argmax(-1) == stream[positions + j + 1]).float().mean()))
    return math.exp(-float(logp.sum()) / (n - 1)), n - 1, accuracy


def random_docs(seed, count=7, vocab=VOCAB):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, vocab, rng.integers(1, 9)) for _ in range(count)]


@pytest.mark.parametrize("seed", [0, 1])
def test_one_window_equals_full_context_forward(seed):
    model, heads = model_and_heads(4, seed)
    docs = random_docs(seed)
    expected, tokens, accuracy = direct(model, heads, docs, 4)
    assert any(a > 0 for a in accuracy)  # the accuracy check is not vacuous
    result = target_perplexity(model, heads, docs, EOS, seq_len=128, stride=64)
    assert result.tokens == tokens == sum(len(d) + 1 for d in docs)
    assert result.perplexity == pytest.approx(expected, rel=1e-5)
    assert result.head_accuracy == pytest.approx(accuracy)


@pytest.mark.parametrize("seq_len,stride", [(8, 3), (8, 8), (5, 1), (16, 9)])
def test_windows_score_every_token_once(seq_len, stride):
    n = 41
    scored = []
    for start, skip in _windows(n, seq_len, stride):
        inputs = min(seq_len, n - 1 - start)
        scored += [start + i for i in range(max(skip, 0), inputs)]
        assert max(skip, 0) <= seq_len - stride or start == 0
    assert scored == list(range(n - 1))


def test_short_windows_still_count_every_token():
    model, heads = model_and_heads(3)
    docs = random_docs(3, count=12)
    windowed = target_perplexity(model, heads, docs, EOS, seq_len=12, stride=6, batch_size=3)
    assert windowed.tokens == sum(len(d) + 1 for d in docs)
    assert math.isfinite(windowed.perplexity) and len(windowed.head_accuracy) == 2
    # Windows as long as the stream see the full context: the one-forward figure.
    full = target_perplexity(model, heads, docs, EOS, seq_len=256, stride=128)
    assert full.perplexity == pytest.approx(direct(model, heads, docs, 3)[0], rel=1e-5)
    assert windowed.perplexity != pytest.approx(full.perplexity, rel=1e-6)  # the windows cut context
    with pytest.raises(ValueError, match="stride"):
        target_perplexity(model, heads, docs, EOS, seq_len=4, stride=5)


class _SumLM:
    """Stands in for NgramLM: a fixed log-probability per predicted token."""

    def token_scores(self, tokens, context, bos, eos):
        assert bos and eos and len(context) == 0
        return np.full(len(tokens) + 1, -2.0)


def test_lm_perplexity_counts_end_of_document():
    docs = random_docs(5)
    ppl, count = lm_perplexity(_SumLM(), docs)
    assert count == sum(len(d) + 1 for d in docs)
    assert ppl == pytest.approx(math.exp(2.0))
    with pytest.raises(ValueError, match="no tokens"):
        lm_perplexity(_SumLM(), [])
    unknown = _SumLM()
    unknown.token_scores = lambda tokens, *_: np.full(len(tokens) + 1, -1000.0)  # every token out of vocabulary
    assert lm_perplexity(unknown, docs) == (math.inf, count)


def test_cli_on_a_target_folder(tmp_path, capsys):
    """`model perplexity --model FOLDER` (model/ + heads/) scores the text with the folder's
    tokenizer, model and heads: the library's figures, and each LM's."""
    from draftlattice import NgramLM
    from draftlattice.tokenizer import load_tokenizer

    target = tiny_target(tmp_path / "target")
    text = tmp_path / "text.txt"
    text.write_text(" = Robert Boulter = \n\n Robert Boulter is an English film , television and theatre actor .\n")
    args = ["model", "perplexity", "--model", str(target.folder), "--text", str(text), "--lm", str(target.lm)]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    tokenizer = load_tokenizer(target.tokenizer)
    docs = documents(text, lambda line: tokenizer.encode(line).ids)
    expected = target_perplexity(target.model, target.heads, docs, end_of_text_id(tokenizer), 256, 128)
    assert report["tokens"] == expected.tokens == sum(len(d) + 1 for d in docs) > 10
    assert report["model"] == pytest.approx(expected.perplexity, rel=1e-5)
    assert report["head_accuracy"] == pytest.approx(expected.head_accuracy) and len(report["head_accuracy"]) == 2
    assert report["lms"] == {str(target.lm): pytest.approx(lm_perplexity(NgramLM(target.lm), docs)[0])}
    assert main(args) == 0  # the text report
    assert "perplexity" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_json_on_the_default_model(tmp_path, capsys):
    """The default model (fetched like a user would; skipped when it cannot be) with its shipped LM."""
    from draftlattice.assets import model_asset

    fetched_default_model()
    text = tmp_path / "text.txt"
    text.write_text(" = Robert Boulter = \n\n Robert Boulter is an English film , television and theatre actor .\n")
    lm = model_asset("smollm2/katz4.dlm")
    assert main(["model", "perplexity", "--text", str(text), "--lm", str(lm), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"tokens", "model", "lms", "head_accuracy"}
    assert report["tokens"] > 10 and report["model"] > 1 and report["lms"][str(lm)] > 1
    assert len(report["head_accuracy"]) == 3  # heads 2..4 of the shipped heads
