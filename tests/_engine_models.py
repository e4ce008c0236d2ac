"""A tiny transformers model with trained draft heads, and an n-gram LM over its own text, for the
engine tests (tests/test_engine_*.py).

Fresh heads reproduce the model's next-token law at their own position, so their drafts are
almost never accepted and multi-token acceptance would go untested. These heads are trained for
a few seconds on the model's own greedy continuations (``train_heads(targets="greedy")``): drafts
are often, but not always, accepted, so acceptance, rejection and cache rollback all happen.
"""

from __future__ import annotations

import functools

import torch

from _hf_models import llama
from draftlattice.decode import Engine, RowStopper
from draftlattice.training import train_heads

PROMPTS = [[3, 4, 5], [7, 7, 7, 7, 9], [1], [10, 20, 30, 40, 11, 12], [5, 6]]


@functools.cache
def trained(horizon: int = 4, seed: int = 0, next_token: bool = False, **config):
    """``(model, heads)``: the tiny float32 Llama (V = 48; ``config`` overrides its sizes) and
    heads 2..horizon trained on its greedy continuations of random 4-token prompts (60 steps,
    about 10 s on one thread); ``next_token``: heads that also read token t + 1."""
    model = llama(seed=seed, **config)
    corpus = torch.randint(0, model.config.vocab_size, (64 * 32,), generator=torch.Generator().manual_seed(seed))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only add overhead on the shared machine
    try:
        settings = dict(steps=60, batch_size=8, seq_len=32, targets="greedy", prompt_len=4, lr=1e-2, log_every=10_000)
        result = train_heads(
            model, corpus, horizon=horizon, seed=seed, next_token=next_token, progress=False, **settings
        )
    finally:
        torch.set_num_threads(threads)
    return model, result.heads.eval()


def run(engine: Engine, ids, max_new_tokens: int, mask=None, eos=(), pad: int = 0):
    """``engine.run`` as generate() calls it: ``(tokens per row, stats, [B, P + new] padded output)``."""
    stopper = RowStopper(ids, max_new_tokens, set(eos), [], pad)
    tokens, stats = engine.run(ids, stopper, attention_mask=mask, max_length=ids.shape[1] + max_new_tokens)
    return tokens, stats, stopper.output(ids, tokens)


def unpadded(ids, mask=None) -> list[list[int]]:
    """Each row's prompt without its left padding."""
    if mask is None:
        return ids.tolist()
    return [[t for t, ok in zip(row, keep) if ok] for row, keep in zip(ids.tolist(), mask.tolist())]


class Recording:
    """Wraps a drafter and logs what the engine hands it: the heads' logits (propose) and each
    row's context (finish), in the engine's order propose, finish, propose, ..."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.p = inner, inner.name, inner.p
        self.heads: list[torch.Tensor] = []
        self.contexts: list[list[list[int]]] = []

    def propose(self, head_logits, sampling, draws):
        self.heads.append(head_logits.clone())
        return self.inner.propose(head_logits, sampling, draws)

    def finish(self, proposal, host, contexts, device):
        self.contexts.append([list(c) for c in contexts])
        return self.inner.finish(proposal, host, contexts, device)


def assert_seeded_sampling_repeats(model, heads, lm, rule: str, temperature: float, seed: int) -> None:
    """Two seeded sampling runs of PROMPTS[0] (16 tokens, lattice drafts k = 3, p = 3) draw the
    same tokens and produce all 16."""
    from draftlattice.decode import LatticeDrafter, Sampling

    ids = torch.tensor([PROMPTS[0]])
    sampling = Sampling(temperature=temperature)
    outputs = []
    for _ in range(2):
        torch.manual_seed(seed)
        engine = Engine(
            model,
            heads,
            LatticeDrafter(lm, k=3, p=3),
            sample_rule=rule,
            sampling=sampling,
            processors=sampling.processors(),
        )
        tokens, stats = engine.run(ids, RowStopper(ids, 16, set(), [], 0), max_length=ids.shape[1] + 16)
        outputs.append(tokens)
        assert stats.new_tokens == 16
    assert outputs[0] == outputs[1]
