"""The held-out positions of bench/tune_sample_alpha.py, for the benchmarks that compute exact
acceptance of sampled drafts there: each calibration prompt continued by sampling, then every
``stride``-th position with its context, the cached keys and values before it, and the heads'
logits that draft after it."""

from __future__ import annotations

import torch

from draftlattice import verify
from draftlattice.apps import tune_sampling
from draftlattice.decode import Sampling
from draftlattice.decode.stopping import RowStopper
from draftlattice.decode.target import draft_head_logits
from tune_sample_alpha import calibration_prompts


def heldout_positions(bundle, heads, sampling: Sampling, stride: int = 4, max_new_tokens: int = 64):
    """Yields ``(prompt index, position t, context, prefix, head logits [h-1, V])``: ``context``
    the tokens up to t (its last one decided, not yet cached), ``prefix`` the keys and values
    of every layer before it."""
    model = bundle.model
    sampler = tune_sampling.continuation_sampler(model, heads, sampling)
    for i, prompt in enumerate(calibration_prompts(bundle, 8, 8)):
        torch.manual_seed(i)
        ids = torch.tensor([prompt])
        stopper = RowStopper(ids, max_new_tokens, set(), [], 0)
        sequence = prompt + sampler.run(ids, stopper, max_length=len(prompt) + max_new_tokens)[0][0]
        hidden, kv = tune_sampling._cached_forward(model, torch.tensor([sequence]))
        head_logits = draft_head_logits(heads, model, hidden[0], torch.tensor(sequence[1:] + [0]))
        for t in range(len(prompt), len(sequence), stride):
            prefix = [(keys[:, :, :t], values[:, :, :t]) for keys, values in kv]
            yield i, t, sequence[: t + 1], prefix, head_logits[t - 1]


def target_laws(model, context: list[int], prefix, drafts: torch.Tensor, temperature: float) -> torch.Tensor:
    """The target's law after every prefix of each draft ``drafts [rows, g]``, ``[rows, g+1, V]``."""
    rows, g = drafts.shape
    root = torch.full((rows, 1), context[-1])
    positions = torch.arange(len(context) - 1, len(context) + g).expand(rows, g + 1)
    z = tune_sampling._cached_forward(model, torch.cat([root, drafts], 1), positions, prefix)[0]
    return verify.sampling_distribution(model.get_output_embeddings()(z).float(), temperature)
