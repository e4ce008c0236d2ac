"""draftlattice.evaluate.perplexity and `draftlattice model perplexity`, against direct computation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from _decode_models import trained_model
from draftlattice.evaluate.perplexity import _stream, _windows, lm_perplexity, target_perplexity

EOS = 0


def direct(model, docs, h):
    """Full-context log-likelihood and head accuracies of the whole stream in one forward."""
    stream = _stream(docs, EOS)
    with torch.inference_mode():
        logits = model.head_logits(model.trunk(stream[None, :-1]))[0]  # [n-1, h, V]
    logp = logits[:, 0].log_softmax(-1).gather(-1, stream[1:, None])
    n = stream.numel()
    accuracy = []
    for j in range(1, h):
        positions = torch.arange(0, n - 1 - j)
        accuracy.append(float((logits[positions, j].argmax(-1) == stream[positions + j + 1]).float().mean()))
    return math.exp(-float(logp.sum()) / (n - 1)), n - 1, accuracy


def random_docs(seed, count=7, vocab=24):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, vocab, rng.integers(1, 9)) for _ in range(count)]


@pytest.mark.parametrize("seed", [0, 1])
def test_one_window_equals_full_context_forward(seed):
    model = trained_model(4)
    docs = random_docs(seed)
    expected, tokens, accuracy = direct(model, docs, 4)
    result = target_perplexity(model, docs, EOS, seq_len=128, stride=64)
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
    model = trained_model(3)
    docs = random_docs(3, count=12)
    windowed = target_perplexity(model, docs, EOS, seq_len=12, stride=6, batch_size=3)
    assert windowed.tokens == sum(len(d) + 1 for d in docs)
    assert math.isfinite(windowed.perplexity)
    with pytest.raises(ValueError, match="stride"):
        target_perplexity(model, docs, EOS, seq_len=4, stride=5)


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


@pytest.mark.slow
def test_cli_json_on_shipped_model(tmp_path, capsys):
    from draftlattice.assets import model_asset
    from draftlattice.cli.main import main

    text = tmp_path / "text.txt"
    text.write_text(" = Robert Boulter = \n\n Robert Boulter is an English film , television and theatre actor .\n")
    lm = model_asset("katz4.dlm")
    model = model_asset("default")  # the first shipped model (the default is now SmolLM2)
    assert main(["model", "perplexity", "--text", str(text), "--model", str(model), "--lm", str(lm), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"tokens", "model", "lms", "head_accuracy"}
    assert report["tokens"] > 10 and report["model"] > 1 and report["lms"][str(lm)] > 1
    assert len(report["head_accuracy"]) == 7


def test_transformers_target_folder(tmp_path, capsys):
    """A target folder (model/ + heads/, as build_model.sh writes it) is scored through the HF
    adapter; head 1 is the transformers model's own next-token distribution."""
    import shutil

    from transformers import LlamaForCausalLM

    import draftlattice.hf as dlhf
    from _hf_models import llama
    from draftlattice.assets import model_asset
    from draftlattice.cli.main import main

    tokenizer = model_asset("tokenizer.json")
    # LlamaConfig's own special tokens (bos 1, eos 2), unlike the shared factory's default.
    base = llama(4096, seed=0, num_attention_heads=2, max_position_embeddings=128, bos_token_id=1, eos_token_id=2)
    base.save_pretrained(tmp_path / "model")
    shutil.copyfile(tokenizer, tmp_path / "model" / "tokenizer.json")
    base = LlamaForCausalLM.from_pretrained(tmp_path / "model").eval()
    dlhf.DraftHeads.for_model(base, horizon=3).save_pretrained(tmp_path / "heads")

    target = dlhf.HFBlockwiseLM.from_pretrained(tmp_path)
    docs = random_docs(7, count=5, vocab=4096)
    result = target_perplexity(target, docs, EOS, seq_len=128, stride=64)
    stream = _stream(docs, EOS)
    with torch.inference_mode():
        logp = base(stream[None, :-1]).logits[0].log_softmax(-1).gather(-1, stream[1:, None])
    assert result.perplexity == pytest.approx(math.exp(-float(logp.sum()) / (stream.numel() - 1)), rel=1e-5)
    assert len(result.head_accuracy) == 2

    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\n\nand then it left\n")
    assert main(["model", "perplexity", "--model", str(tmp_path), "--text", str(text), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] > 5
