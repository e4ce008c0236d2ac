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
