"""Property tests of lossless sampling (hypothesis; profiles in tests/_properties.py).

1. The verification rules' exact laws over random small configurations: a whole speculative loop
   (draft, verify, append, until N tokens) enumerated in float64 on a random context-dependent
   target and drafter over 2-4 tokens (tests/_verify_helpers.py ``ContextModel``) gives exactly
   the target's law of N tokens, for every rule (token and block verification with fixed or
   per-context draft lengths; the tree rule, recursive rejection sampling with and without
   replacement, and i.i.d. drafts joined by a copied one), random V, p, g and N. The laws and
   draft enumerations are those of tests/test_verify_sampling.py and test_verify_multi_draft.py.
2. ``generate(do_sample=True, custom_generate=...)`` over random settings (rule, p, k, LM and
   its weight, layout, context lookup, temperature, top-k, top-p, repetition penalty, an EOS id,
   left-padded longer rows beside): the law of the new tokens of many rows of one prompt against
   the law enumerated from the model with generate()'s own processors (chi-square; the bound
   ``P_MIN`` keeps false alarms below one in a hundred thousand examples).
"""

from __future__ import annotations

import functools
import itertools
import random

import torch
from hypothesis import assume, event, example, given
from hypothesis import strategies as st

from _laws import law_p_value
from _properties import examples, marks
from _verify_helpers import ContextModel
from test_verify_multi_draft import PositiveQ, law_of, step_cases, tensors
from test_verify_sampling import LAWS, _draft_enumeration

pytestmark = marks()

WORK = 3000  # contexts x draft sets enumerated per example, at most (about a second)


# ----------------------------------------------------------------------------- exact laws


def loop_law(N: int, outcomes) -> dict[tuple[int, ...], float]:
    """Law of the first N tokens of a speculative loop whose step after context ``s`` has the
    outcomes ``outcomes(s)``: (tokens appended, probability)."""
    mass: dict[tuple, float] = {(): 1.0}
    final: dict[tuple, float] = {}
    while mass:
        s = min(mass, key=len)
        m = mass.pop(s)
        for appended, prob in outcomes(s):
            t = (s + appended)[:N]
            bucket = final if len(t) == N else mass
            bucket[t] = bucket.get(t, 0.0) + m * prob
    return final


def one_draft_outcomes(model: ContextModel, rule: str, g: int, length):
    """Token or block verification of one draft of ``length(s)`` tokens drawn from q."""

    def outcomes(s):
        L = length(s)
        X, prob, q, p = _draft_enumeration(model, s, g, L)
        law = LAWS[rule](X, q, p, torch.full((len(X),), L)) * prob[:, None, None]
        for r, k, y in torch.nonzero(law).tolist():
            yield tuple(X[r, :k].tolist()) + (y,), float(law[r, k, y])

    return outcomes


def several_drafts_outcomes(model: ContextModel, rule: str, p: int, g: int, seed: int):
    """The multi-draft rules over every draft set the drafter can propose (test_verify_multi_draft)."""

    def outcomes(s):
        cases = step_cases(model, s, rule, p, g, seed)
        X, tp, q = (torch.stack(t) for t in zip(*(tensors(model, s, d) for d, _ in cases)))
        law = law_of(rule, X, tp, q)
        for c, i, k, y in torch.nonzero(law).tolist():
            yield tuple(X[c, i, :k].tolist()) + (y,), float(law[c, i, k, y]) * cases[c][1]

    return outcomes


@st.composite
def loop_configs(draw):
    """(rule, V, p, g, N, seed, lengths) with at most WORK contexts x draft sets."""
    rule = draw(st.sampled_from(["token", "block", "tree", "rrs", "wor", "copy"]))
    V = draw(st.integers(2, 4))
    g = draw(st.integers(1, 3))
    p = 1 if rule in ("token", "block") else draw(st.integers(1 if rule != "wor" else 2, 3 if rule != "wor" else V))
    iid_rows = {"rrs": p, "wor": p, "copy": p - 1}.get(rule, 0)
    sets = V ** (g * iid_rows)  # draft sets per context, at most
    assume(sets <= WORK)
    longest = max(n for n in range(1, 6) if sum(V**i for i in range(n)) * sets <= WORK or n == 1)
    N = draw(st.integers(1, longest))
    lengths = draw(st.sampled_from(["full", "cycle", "random"])) if rule in ("token", "block") else "full"
    return rule, V, p, g, N, draw(st.integers(0, 2**32 - 1)), lengths


@examples(ci=100, long=1500)
@given(config=loop_configs())
@example(config=("wor", 3, 3, 2, 3, 1, "full"))
@example(config=("block", 4, 1, 3, 4, 7, "random"))
@example(config=("token", 3, 1, 3, 5, 9, "cycle"))
@example(config=("copy", 3, 2, 2, 3, 5, "full"))
@example(config=("rrs", 2, 3, 2, 4, 11, "full"))
def test_speculative_loops_sample_exactly_the_target_law(config):
    rule, V, p, g, N, seed, lengths = config
    model = (PositiveQ if rule == "wor" else ContextModel)(V, seed)
    if rule in ("token", "block"):
        length = {
            "full": lambda s: g,
            "cycle": lambda s: (1 + len(s)) % (g + 1),
            "random": lambda s: random.Random(f"{seed}:L:{s}").randrange(g + 1),
        }[lengths]
        law = loop_law(N, one_draft_outcomes(model, rule, g, length))
    else:
        law = loop_law(N, several_drafts_outcomes(model, rule, p, g, seed))
    assert abs(sum(law.values()) - 1) < 1e-12
    for seq in itertools.product(range(V), repeat=N):
        target = 1.0
        for i in range(N):
            target *= model.p(seq[:i])[seq[i]]
        assert abs(law.get(seq, 0.0) - target) < 1e-9, (seq, law.get(seq, 0.0), target)
    event(f"rule {rule}")


# ----------------------------------------------------------------------------- generate() laws

V, NEW, PROMPT, ROWS = 6, 3, (1, 2, 3), 6000
P_MIN = 1e-5


@functools.cache
def peaked():
    """The tiny Llama (V = 6) with a far-from-uniform law and heads that disagree with it, and a
    bigram LM over its token ids."""
    import tempfile
    from pathlib import Path

    from _hf_models import ngram_over, peaked_model_and_heads

    model, heads = peaked_model_and_heads(V)
    lm = ngram_over(
        Path(tempfile.mkdtemp(prefix="draftlattice-law-")),
        [[(3 * i + j) % V for j in range(12)] for i in range(V)],
        order=2,
    )
    return model, heads, lm


@st.composite
def sampling_configs(draw) -> dict:
    rule = draw(st.sampled_from(["multi", "tree", "block", "token"]))
    config = dict(
        rule=rule,
        p=1 if rule in ("block", "token") else draw(st.integers(1, 3)),
        k=draw(st.integers(2, 5)),
        use_lm=draw(st.booleans()),
        sample_alpha=draw(st.sampled_from([0.0, 0.2, 1.0, 2.0])),
        alpha=draw(st.sampled_from([0.0, 1.0])),
        verify=draw(st.sampled_from(["tree", "batch"])),
        lookup=draw(st.sampled_from([0, 2])) if rule in ("multi", "tree") else 0,
        temperature=draw(st.sampled_from([0.6, 1.0, 1.4])),
        top_k=draw(st.sampled_from([None, 3, 5])),
        top_p=draw(st.sampled_from([None, 0.8, 0.95])),
        repetition_penalty=draw(st.sampled_from([None, None, 1.3])),
        eos=draw(st.sampled_from([None, None, 2, 5])),
        padded_rows=draw(st.sampled_from([0, 0, 500])),
        seed=draw(st.integers(0, 2**31 - 1)),
    )
    return config


def processed_law(model, config: dict) -> dict[tuple[int, ...], float]:
    """P(new tokens | PROMPT) under generate()'s own processors and warpers, every continuation
    in one forward; a continuation that reaches the EOS id ends there (keys cut after it)."""
    from transformers import LogitsProcessorList, RepetitionPenaltyLogitsProcessor

    from draftlattice.decode import Sampling

    continuations = list(itertools.product(range(V), repeat=NEW))
    batch = torch.tensor([list(PROMPT) + list(c) for c in continuations])
    processors = LogitsProcessorList()
    if config["repetition_penalty"]:
        processors.append(RepetitionPenaltyLogitsProcessor(config["repetition_penalty"]))
    processors.extend(Sampling(config["temperature"], config["top_k"], config["top_p"]).processors())
    with torch.inference_mode():
        logits = model(batch).logits.double()
        steps = []
        for j in range(NEW):
            at = len(PROMPT) + j
            probs = processors(batch[:, :at], logits[:, at - 1].clone()).softmax(-1)
            steps.append(probs.gather(-1, batch[:, at : at + 1]).squeeze(-1))
    law: dict[tuple[int, ...], float] = {}
    for c, prob in zip(continuations, torch.stack(steps, -1).tolist()):
        key, total = [], 1.0
        for token, pr in zip(c, prob):
            key.append(token)
            total *= pr
            if token == config["eos"]:
                break
        law[tuple(key)] = law.get(tuple(key), 0.0) + total / (V ** (NEW - len(key)))  # counted once per tail
    return law


def sampled_counts(model, heads, lm, config: dict) -> tuple[dict[tuple[int, ...], int], object]:
    import draftlattice.hf as dlhf
    from _hf_models import left_padded

    prompts = [list(PROMPT)] * ROWS + [[4, 0, 5, 2, 1, 1]] * config["padded_rows"]
    ids, mask = left_padded(prompts)
    torch.manual_seed(config["seed"])
    extra = {"repetition_penalty": config["repetition_penalty"]} if config["repetition_penalty"] else {}
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=mask,
            do_sample=True,
            temperature=config["temperature"],
            top_k=config["top_k"] or 0,
            top_p=config["top_p"] or 1.0,
            max_new_tokens=NEW,
            pad_token_id=0,
            eos_token_id=config["eos"],
            custom_generate=dlhf.generate,
            return_dict_in_generate=True,
            draft_heads=heads,
            draft_lm=lm if config["use_lm"] else None,
            draft_k=config["k"],
            draft_p=config["p"],
            draft_alpha=config["alpha"],
            draft_sample=config["rule"],
            draft_sample_alpha=config["sample_alpha"],
            draft_verify=config["verify"],
            draft_lookup=config["lookup"],
            **extra,
        )
    counts: dict[tuple[int, ...], int] = {}
    for row in out.sequences[:ROWS, ids.shape[1] :].tolist():
        key = []
        for token in row:
            key.append(token)
            if token == config["eos"]:
                break
        counts[tuple(key)] = counts.get(tuple(key), 0) + 1
    return counts, out.draft_stats


@examples(ci=6, long=100)
@given(config=sampling_configs())
@example(
    config=dict(
        rule="multi",
        p=3,
        k=4,
        use_lm=True,
        sample_alpha=1.0,
        alpha=1.0,
        verify="tree",
        lookup=2,
        temperature=0.6,
        top_k=5,
        top_p=None,
        repetition_penalty=1.3,
        eos=2,
        padded_rows=500,
        seed=1,
    )
)
def test_generate_samples_the_target_law(config):
    model, heads, lm = peaked()
    counts, stats = sampled_counts(model, heads, lm, config)
    event(f"rule {config['rule']}")
    if sum(map(sum, stats.accepted)):
        event("drafts were accepted")
    assert law_p_value(processed_law(model, config), counts) > P_MIN
