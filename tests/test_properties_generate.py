"""Property tests of ``generate(custom_generate=draftlattice.hf.generate)`` against plain
``generate()`` (hypothesis; profiles in tests/_properties.py).

Random calls (tests/_properties.py ``cases``): four architectures (Llama, GPT-2, Qwen2, and
Mistral with groups of 4 query heads per key/value head), 1-4 rows with left padding, prompts up
to the position limit, ``max_new_tokens`` or ``max_length``, no, one or several EOS ids, user
stopping criteria, generate()'s logits processors (repetition penalty, n-gram blocking, bad
words, sequence bias, suppression, minimum lengths, forced EOS, length penalty) and user ones,
every draft setting (h, k, p, alpha, layout, context lookup, with and without an n-gram LM), in
float32. Greedy output must equal generate()'s token for token; ``do_sample=True`` with
``top_k=1`` (a point mass: the sampling path, every rule) must too.

Float32 verification forwards (a tree or chains under an explicit mask) do not round exactly as
generate()'s one-token forwards: where two tokens' scores are within ``TIE`` of each other the
two may pick differently. A difference is accepted only there (at the first differing token of
a row, generate()'s score of the drafted output's token is within ``TIE`` of its maximum).
"""

from __future__ import annotations

import torch
from hypothesis import event, example, given, note

from _properties import POSITIONS, Case, cases, draft_kwargs, examples, generate_kwargs, inputs, marks, target

pytestmark = marks()

TIE = 1e-4


def reference(case: Case):
    """Plain greedy generate(): ``(sequences, scores)`` (the processed scores of every step)."""
    model, _, _ = target(case.arch)
    ids, mask = inputs(case)
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=mask,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
            **generate_kwargs(case),
        )
    return out.sequences, out.scores


def drafted(case: Case, **sampling):
    model, heads, lm = target(case.arch)
    ids, mask = inputs(case)
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=mask,
            return_dict_in_generate=True,
            **generate_kwargs(case),
            **draft_kwargs(case, heads, lm),
            **sampling,
        )
    return out.sequences, out.draft_stats


def assert_same_tokens(case: Case, expected, scores, got) -> None:
    """Row by row, the same new tokens (and padding), but for a near tie (see the module)."""
    width = case.width
    assert torch.equal(got[:, :width], expected[:, :width])
    for b, (want, have) in enumerate(zip(expected[:, width:].tolist(), got[:, width:].tolist())):
        for t in range(max(len(want), len(have))):
            w = want[t] if t < len(want) else None
            g = have[t] if t < len(have) else None
            if w == g:
                continue
            assert w is not None and g is not None, f"row {b}: lengths differ at new token {t}: {want} vs {have}"
            step = scores[t][b].float()
            gap = float(step.max() - step[g])
            assert gap <= TIE * max(1.0, float(step.abs().max())), (
                f"row {b}, new token {t}: generate() chose {w}, draftlattice {g} (score gap {gap:.3g})\n"
                f"generate(): {want}\ndrafted:    {have}"
            )
            event("a near tie decided differently")
            note(f"row {b}, new token {t}: near tie {w} / {g} (gap {gap:.3g})")
            break


@examples(ci=60, long=5000)
@given(case=cases())
@example(  # a full position table: the drafts' positions past it are clamped, never committed
    case=Case(arch="gpt2", prompts=((5,) * (POSITIONS - 2), (1, 2)), new=2, k=4, p=4, use_lm=True)
)
@example(case=Case(arch="mistral", prompts=((1, 2, 3), (4,)), new=20, eos=(7, 9), lookup=2, verify="batch"))
@example(  # found: two EOS ids in a batch of two rows were sliced as per-row state (one id per row)
    case=Case(prompts=((0,), (0,)), new=11, eos=(0, 1), processors={"exponential_decay_length_penalty": (0, 1.1)}, h=2)
)
@example(  # found: without EOS ids, generate() does not pad a row a user criterion stopped; it goes on
    case=Case(prompts=((0,), (41,), (0, 0)), new=8, stop_token=0, custom=("next_of_last",), h=2, k=1, p=1)
)
def test_greedy_output_equals_generate(case):
    expected, scores = reference(case)
    got, stats = drafted(case, do_sample=False)
    assert_same_tokens(case, expected, scores, got)
    assert stats.target_calls == stats.steps + 1
    event(f"{min(stats.steps, 4)}{'+' if stats.steps >= 4 else ''} verification steps")
    if stats.steps:
        event("drafts were verified")
        if sum(map(sum, stats.accepted)):
            event("drafts were accepted")


@examples(ci=25, long=1500)
@given(case=cases(sampling=True))
@example(case=Case(arch="qwen2", prompts=((3, 4, 5), (7,)), new=12, sample_rule="token", use_lm=True, p=1))
def test_sampling_with_top_k_1_equals_greedy_generate(case):
    """top_k=1 makes the target's law a point mass: every sampling rule must give greedy output."""
    expected, scores = reference(case)
    got, _ = drafted(
        case,
        do_sample=True,
        top_k=1,
        temperature=case.temperature,
        top_p=case.top_p,
        draft_sample=case.sample_rule,
        draft_sample_alpha=case.sample_alpha,
    )
    assert_same_tokens(case, expected, scores, got)
