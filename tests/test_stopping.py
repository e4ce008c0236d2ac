"""decode/stopping.py: rows stop where generate() stops them, and end as generate() ends them."""

from __future__ import annotations

import torch

from draftlattice.decode import RowStopper


class StopAtToken:
    """A user stopping criterion: stop a row after ``token``."""

    def __init__(self, token: int) -> None:
        self.token = token

    def __call__(self, input_ids, scores, **kwargs):
        return input_ids[:, -1] == self.token


def test_with_eos_ids_a_stopped_row_is_padded():
    stopper = RowStopper(torch.zeros(2, 1, dtype=torch.int64), 6, {9}, [StopAtToken(0)], pad=7)
    new: list[list[int]] = [[], []]
    scores = torch.zeros(4, 10)
    stopper.commit(0, [1, 0, 2, 3], new, scores)  # the criterion stops row 0 at its second token
    assert new[0] == [1, 0] and stopper.done[0]
    stopper.commit(1, [4, 5, 9, 6], new, scores)  # the EOS id stops row 1
    assert new[1] == [4, 5, 9] and stopper.all_done
    assert stopper.output(torch.zeros(2, 1, dtype=torch.int64), new)[:, 1:].tolist() == [[1, 0, 7], [4, 5, 9]]


def test_without_eos_ids_a_row_stopped_early_goes_on_to_the_last_stop():
    """generate() pads finished rows only when it has EOS ids: a row a user criterion stopped
    keeps its own tokens until every row has stopped (found by tests/test_properties_generate.py)."""
    stopper = RowStopper(torch.zeros(3, 1, dtype=torch.int64), 10, set(), [StopAtToken(0)], pad=7)
    new: list[list[int]] = [[], [], []]
    scores = torch.zeros(5, 10)
    stopper.commit(0, [1, 0, 2], new, scores)  # stopped at 2 tokens, goes on
    assert new[0] == [1, 0, 2] and not stopper.done[0]
    stopper.commit(1, [3, 4, 5, 6, 0], new, scores)  # stops at 5 tokens
    stopper.commit(2, [8], new, scores)
    assert not any(stopper.done)
    stopper.commit(0, [3, 4, 5, 6], new, scores)  # past the batch's end (unknown yet): kept for now
    stopper.commit(2, [8, 0], new, scores)  # the last row stops at 3 tokens: all end at 5
    assert stopper.width == 5 and stopper.done == [True, True, False]
    stopper.commit(2, [1, 2, 3], new, scores)
    assert new[2] == [8, 8, 0, 1, 2] and stopper.all_done
    output = stopper.output(torch.zeros(3, 1, dtype=torch.int64), new)[:, 1:]
    assert output.tolist() == [[1, 0, 2, 3, 4], [3, 4, 5, 6, 0], [8, 8, 0, 1, 2]]


def test_a_user_criterion_without_eos_equals_generate():
    """The property tests' shrunk failing case through generate(): row 1 counts up from 41 (a
    user processor favours the last token's successor) to 0, then goes on in generate()."""
    from transformers import LogitsProcessorList, StoppingCriteriaList

    import draftlattice.hf as dlhf
    from _hf_models import greedy, left_padded, llama
    from _properties import CUSTOM_PROCESSORS
    from _tiny_target import distilled_heads

    model = llama(max_position_embeddings=64)
    heads = distilled_heads(model, horizon=2, prompts=16, new_tokens=24)
    ids, mask = left_padded([[0], [41], [0, 0]])
    settings = dict(max_new_tokens=8, eos_token_id=None, pad_token_id=0)
    criteria = lambda: StoppingCriteriaList([StopAtToken(0)])  # noqa: E731
    processors = lambda: LogitsProcessorList([CUSTOM_PROCESSORS["next_of_last"]()])  # noqa: E731
    expected = greedy(model, ids, mask, stopping_criteria=criteria(), logits_processor=processors(), **settings)
    assert expected[1, 2:].tolist() == [42, 43, 44, 45, 46, 47, 0, 1]  # stopped at 0, went on
    with torch.inference_mode():
        got = model.generate(
            ids,
            attention_mask=mask,
            do_sample=False,
            stopping_criteria=criteria(),
            logits_processor=processors(),
            **settings,
            custom_generate=dlhf.generate,
            draft_heads=heads,
            draft_k=1,
            draft_p=1,
        )
    assert got.tolist() == expected.tolist()
