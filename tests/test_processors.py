"""decode/processors.py: generate()'s logits processors seen by the copies of one row."""

from __future__ import annotations

import torch
from transformers.generation.logits_process import (
    ExponentialDecayLengthPenalty,
    RepetitionPenaltyLogitsProcessor,
    SuppressTokensLogitsProcessor,
)

from draftlattice.decode.processors import row_processors


def test_only_per_row_state_is_sliced_to_the_row():
    """The repetition penalty's padding lengths [B] are per row; EOS ids or suppressed tokens are
    token ids even when there are B of them (found by tests/test_properties_generate.py: two EOS
    ids in a batch of two rows gave each row one of them)."""
    batch = 2
    penalty = RepetitionPenaltyLogitsProcessor(1.5, prompt_ignore_length=torch.tensor([3, 1]))
    decay = ExponentialDecayLengthPenalty((0, 1.1), torch.tensor([0, 1]), 1)
    suppress = SuppressTokensLogitsProcessor([4, 7])

    class UserState:  # a user's processor with per-row state
        def __init__(self):
            self.offsets = torch.tensor([10, 20])

        def __call__(self, input_ids, scores):
            return scores

    views = row_processors([penalty, decay, suppress, UserState()], row=1, batch=batch, copies=3)
    assert views[0].prompt_ignore_length.tolist() == [1, 1, 1]
    assert views[1].eos_token_id.tolist() == [0, 1]
    assert views[2].suppress_tokens.tolist() == [4, 7]
    assert views[3].offsets.tolist() == [20, 20, 20]
    assert penalty.prompt_ignore_length.tolist() == [3, 1]  # the originals are left as they were


def test_two_eos_ids_in_a_batch_of_two_equal_generate():
    """The property tests' shrunk failing case: identical rows, EOS ids (0, 1), a length penalty on
    them from the first new token: row 1 saw only EOS 1 and went on past generate()'s EOS."""
    import draftlattice.hf as dlhf
    from _hf_models import greedy, llama
    from _tiny_target import distilled_heads

    model = llama(max_position_embeddings=64)
    heads = distilled_heads(model, horizon=2, prompts=16, new_tokens=24)
    ids = torch.tensor([[0], [0]])
    settings = dict(max_new_tokens=11, eos_token_id=[0, 1], exponential_decay_length_penalty=(0, 1.1))
    expected = greedy(model, ids, **settings)
    with torch.inference_mode():
        got = model.generate(
            ids,
            do_sample=False,
            pad_token_id=0,
            custom_generate=dlhf.generate,
            draft_heads=heads,
            draft_k=1,
            draft_p=1,
            **settings,
        )
    assert got.tolist() == expected.tolist()
