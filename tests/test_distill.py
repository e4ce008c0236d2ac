"""Self-distillation corpora (draftlattice.training.distill): through a lean step, each record is
the step's own greedy answer to its prompt; interrupted runs resume; bad settings are refused."""

from __future__ import annotations

import pytest
import torch

from _hf_models import llama
from draftlattice.distilled_corpus import DistilledCorpus
from draftlattice.lean import LeanLlama
from draftlattice.training.distill import distill
from draftlattice.training.distillation_prompts import Prompt


class CharTokenizer:
    """Text prompts as one id per character (ids 1..60), enough for ``encode_prompt``."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [1 + ord(c) % 60 for c in text]}


def _model():
    model = llama(
        seed=4, vocab=64, hidden_size=128, intermediate_size=160, num_attention_heads=2, num_key_value_heads=1
    )
    model.generation_config.eos_token_id = 63
    return model.to(torch.bfloat16)


PROMPTS = [Prompt("text", t) for t in ("the cat", "a", "on the mat by the door", "xyz", "hello there")]


def test_records_are_the_steps_own_greedy_answers(tmp_path):
    model = _model()
    lean = LeanLlama(model, "int4")
    out = distill(
        model, CharTokenizer(), PROMPTS, tmp_path / "c", batch_size=2, max_new_tokens=9, shard_size=3, step=lean
    )
    corpus = DistilledCorpus.load(out)
    assert len(corpus) == len(PROMPTS) and corpus.meta["step"] == "lean int4"
    for i, prompt in enumerate(PROMPTS):
        tokens, prompt_len = corpus.record(i).tolist(), int(corpus.prompt_lens[i])
        ids = CharTokenizer()(prompt.text)["input_ids"]
        assert tokens[:prompt_len] == ids
        assert tokens[prompt_len:] == lean.greedy(torch.tensor([ids]), 9, 63)


def test_a_rerun_resumes_and_other_settings_are_refused(tmp_path):
    model = _model()
    lean = LeanLlama(model, "int4")
    out = distill(
        model, CharTokenizer(), PROMPTS[:3], tmp_path / "c", batch_size=2, max_new_tokens=5, shard_size=3, step=lean
    )
    first = (out / "shard-00000.npz").stat().st_mtime_ns
    distill(model, CharTokenizer(), PROMPTS, tmp_path / "c", batch_size=2, max_new_tokens=5, shard_size=3, step=lean)
    assert (out / "shard-00000.npz").stat().st_mtime_ns == first  # kept, not redone
    assert (out / "shard-00001.npz").is_file()
    with pytest.raises(ValueError, match="other settings"):
        distill(model, CharTokenizer(), PROMPTS, tmp_path / "c", max_new_tokens=5, shard_size=3)  # no step
    with pytest.raises(ValueError, match="greedy answers only"):
        distill(model, CharTokenizer(), PROMPTS, tmp_path / "d", temperature=1.0, step=lean)


def test_a_resumed_runs_eta_times_only_its_own_shards(tmp_path, monkeypatch, caplog):
    import sys
    import types

    distill_module = sys.modules["draftlattice.training.distill"]  # the package exports the function by this name
    model = _model()
    lean = LeanLlama(model, "int4")
    prompts = PROMPTS * 2  # 10 prompts: 5 shards of 2
    distill(
        model, CharTokenizer(), prompts[:6], tmp_path / "c", batch_size=2, max_new_tokens=3, shard_size=2, step=lean
    )
    clock = iter(range(0, 10**6, 10))  # each reading 10 s after the last: one shard per reading after the start
    monkeypatch.setattr(distill_module, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    with caplog.at_level("INFO", logger="draftlattice.training.distill"):
        distill(
            model, CharTokenizer(), prompts, tmp_path / "c", batch_size=2, max_new_tokens=3, shard_size=2, step=lean
        )
    etas = [int(r.getMessage().split("ETA ")[1].split()[0]) for r in caplog.records if "ETA" in r.getMessage()]
    # Shards 4 and 5 are new; 3 were on disk. After shard 4 (10 s), one shard is left: 10 s, not 10 s x 4.
    assert etas == [10, 0]
