"""Hypothesis profiles and the random cases of the property tests (tests/test_properties_*.py).

Profiles (environment variable ``DRAFTLATTICE_HYPOTHESIS``):

- ``ci`` (default): a bounded number of examples per test (191), derandomized (the same
  examples on every run, so CI never fails by chance) and no example database: the property
  tests add about a minute to the suite on two cores.
- ``long``: the run before submitting, with examples drawn afresh and no time limit:
  ``DRAFTLATTICE_HYPOTHESIS=long OMP_NUM_THREADS=1 nice -n 19 pytest tests/test_properties_*.py``
  (8,100 examples: 5,000 greedy calls, 1,500 point-mass sampling calls, 1,500 enumerated loops,
  100 sampled laws; about 40 minutes on a shared two-core machine). Failures are stored in
  ``.hypothesis/`` and replayed first on the next run; a failure worth keeping becomes an
  ``@example`` of its test.

Each test names its own number of examples per profile with :func:`examples`.
"""

from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

PROFILE = os.environ.get("DRAFTLATTICE_HYPOTHESIS", "ci")
_SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.differing_executors]
settings.register_profile("ci", deadline=None, derandomize=True, database=None, suppress_health_check=_SLOW_DATA)
settings.register_profile("long", deadline=None, print_blob=True, suppress_health_check=_SLOW_DATA)
if PROFILE not in ("ci", "long"):
    raise ValueError(f"DRAFTLATTICE_HYPOTHESIS must be 'ci' or 'long', got {PROFILE!r}")
settings.load_profile(PROFILE)


def examples(ci: int, long: int) -> settings:
    """``@settings`` with ``ci`` examples in the CI profile, ``long`` in the long one."""
    return settings(max_examples=ci if PROFILE == "ci" else long)


def marks() -> list:
    """The property test modules' marks: one torch thread; in the long profile no time limit
    (pytest-timeout's 600 s per test would stop a test in its thousands of examples)."""
    import pytest

    untimed = [pytest.mark.timeout(0)] if PROFILE == "long" else []
    return [pytest.mark.usefixtures("one_thread"), *untimed]


# ----------------------------------------------------------------------------- the tiny targets

V = 48  # vocabulary of the tiny models
POSITIONS = 64  # their position limit (GPT-2's learned table; the rotary models' declared maximum)
ARCHS = ("llama", "gpt2", "qwen2", "mistral")  # mistral: grouped-query attention, groups of 4


@functools.cache
def target(arch: str):
    """``(model, heads, lm)`` of one architecture: the tiny float32 model (position limit
    POSITIONS), h = 4 heads distilled on its greedy output (drafts often accepted, not always),
    and a trigram LM over its greedy continuations. Built once per process."""
    from _hf_models import gpt2, llama, mistral, own_ngram, qwen2
    from _tiny_target import distilled_heads

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if arch == "gpt2":
            model = gpt2(n_positions=POSITIONS)
        else:
            model = {"llama": llama, "qwen2": qwen2, "mistral": mistral}[arch](max_position_embeddings=POSITIONS)
        heads = distilled_heads(model, horizon=4, prompts=16, new_tokens=24)
        lm = own_ngram(model, Path(tempfile.mkdtemp(prefix=f"draftlattice-{arch}-")), [])
    finally:
        torch.set_num_threads(threads)
    return model, heads, lm


# ----------------------------------------------------------------------------- generate() cases


@dataclass
class Case:
    """One call of generate(): the same arguments for plain greedy generate() and for
    ``custom_generate=draftlattice.hf.generate`` (the draft settings only for the latter)."""

    arch: str = "llama"
    prompts: tuple[tuple[int, ...], ...] = ((3, 4, 5),)  # left-padded to the longest
    new: int = 8
    by_max_length: bool = False  # max_length = width + new instead of max_new_tokens = new
    eos: tuple[int, ...] = ()  # () None, (e,) one id, else a list
    pad: int = 0
    stop_after: int | None = None  # a user criterion: stop once a row has this many new tokens
    stop_token: int | None = None  # a user criterion: stop after this token
    processors: dict = field(default_factory=dict)  # generate() keywords of logits processors
    custom: tuple[str, ...] = ()  # user logits processors (CUSTOM_PROCESSORS)
    # draft settings
    h: int = 4
    k: int = 8
    p: int = 4
    alpha: float = 0.5
    verify: str = "tree"
    lookup: int = 0
    lookup_tokens: int = 10
    use_lm: bool = False
    # sampling (test_properties_generate's point-mass test)
    sample_rule: str = "multi"
    sample_alpha: float = 0.2
    temperature: float = 1.0
    top_p: float | None = None

    @property
    def width(self) -> int:
        return max(map(len, self.prompts))


def _length_bias():
    from transformers import LogitsProcessor

    class LengthBias(LogitsProcessor):
        """Favours a token that depends on the sequence's length (padding included)."""

        def __call__(self, input_ids, scores):
            scores = scores.clone()
            scores[:, (7 * input_ids.shape[1]) % scores.shape[1]] += 1.5
            return scores

    return LengthBias()


def _next_of_last():
    from transformers import LogitsProcessor

    class NextOfLast(LogitsProcessor):
        """Favours the successor of each row's last token (depends on the row's sequence)."""

        def __call__(self, input_ids, scores):
            scores = scores.clone()
            rows = torch.arange(scores.shape[0], device=scores.device)
            scores[rows, (input_ids[:, -1] + 1) % scores.shape[1]] += 1.0
            return scores

    return NextOfLast()


CUSTOM_PROCESSORS = {"length_bias": _length_bias, "next_of_last": _next_of_last}


def _criteria(case: Case) -> list:
    from transformers import StoppingCriteria

    width = case.width

    class StopAfter(StoppingCriteria):
        def __init__(self, new: int) -> None:
            self.new = new

        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), input_ids.shape[1] - width >= self.new, dtype=torch.bool)

    class StopAtToken(StoppingCriteria):
        def __init__(self, token: int) -> None:
            self.token = token

        def __call__(self, input_ids, scores, **kwargs):
            return input_ids[:, -1] == self.token

    criteria = []
    if case.stop_after is not None:
        criteria.append(StopAfter(case.stop_after))
    if case.stop_token is not None:
        criteria.append(StopAtToken(case.stop_token))
    return criteria


def inputs(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    from _hf_models import left_padded

    return left_padded([list(p) for p in case.prompts], pad=case.pad)


def generate_kwargs(case: Case) -> dict:
    """generate()'s keywords of ``case`` shared by both calls (fresh processor and criteria
    objects on every call: generate() may keep state in them)."""
    from transformers import LogitsProcessorList, StoppingCriteriaList

    kwargs = dict(pad_token_id=case.pad, eos_token_id=None)
    if case.eos:
        kwargs["eos_token_id"] = case.eos[0] if len(case.eos) == 1 else list(case.eos)
    if case.by_max_length:
        kwargs["max_length"] = case.width + case.new
    else:
        kwargs["max_new_tokens"] = case.new
    criteria = _criteria(case)
    if criteria:
        kwargs["stopping_criteria"] = StoppingCriteriaList(criteria)
    if case.custom:
        kwargs["logits_processor"] = LogitsProcessorList([CUSTOM_PROCESSORS[name]() for name in case.custom])
    kwargs.update(case.processors)
    return kwargs


def draft_kwargs(case: Case, heads, lm) -> dict:
    import draftlattice.hf as dlhf

    return dict(
        custom_generate=dlhf.generate,
        draft_heads=heads.truncated(case.h),
        draft_lm=lm if case.use_lm else None,
        draft_k=case.k,
        draft_p=case.p,
        draft_alpha=case.alpha,
        draft_verify=case.verify,
        draft_lookup=case.lookup,
        draft_lookup_tokens=case.lookup_tokens,
    )


tokens = st.integers(0, V - 1)


@st.composite
def processor_keywords(draw, eos: tuple[int, ...], width: int, new: int) -> dict:
    """A random set of generate()'s logits processors (those that need an EOS id only with one)."""
    chosen: dict = {}
    maybe = lambda: draw(st.integers(0, 3)) == 3  # noqa: E731 (each processor in about 1 case in 4)
    if maybe():
        chosen["repetition_penalty"] = draw(st.sampled_from([0.6, 1.2, 1.5, 2.5]))
    if maybe():
        chosen["no_repeat_ngram_size"] = draw(st.integers(1, 3))
    if maybe():
        chosen["suppress_tokens"] = draw(st.lists(tokens, min_size=1, max_size=4, unique=True))
    if maybe():
        chosen["begin_suppress_tokens"] = draw(st.lists(tokens, min_size=1, max_size=3, unique=True))
    if maybe():
        words = st.lists(tokens, min_size=1, max_size=2)
        chosen["bad_words_ids"] = draw(st.lists(words, min_size=1, max_size=3))
    if maybe():
        keys = st.lists(tokens, min_size=1, max_size=2).map(tuple)
        chosen["sequence_bias"] = draw(
            st.dictionaries(keys, st.sampled_from([-3.0, -1.0, 2.0, 4.0]), min_size=1, max_size=3)
        )
    if maybe():
        chosen["renormalize_logits"] = True
    if eos:
        if maybe():
            chosen["min_new_tokens"] = draw(st.integers(1, new))
        if maybe():
            chosen["min_length"] = draw(st.integers(1, width + new))
        if maybe():
            chosen["exponential_decay_length_penalty"] = (draw(st.integers(0, new)), draw(st.sampled_from([1.1, 1.5])))
    if maybe():
        # A forced token that is also suppressed leaves no token at all (generate() refuses it or
        # samples from all -inf): keep it out of the suppressed and banned ones.
        forced = chosen["forced_eos_token_id"] = draw(tokens)
        for name in ("suppress_tokens", "begin_suppress_tokens"):
            if forced in chosen.get(name, ()):
                chosen[name].remove(forced)
                if not chosen[name]:
                    del chosen[name]
        if [forced] in chosen.get("bad_words_ids", ()):
            chosen["bad_words_ids"] = [w for w in chosen["bad_words_ids"] if w != [forced]]
            if not chosen["bad_words_ids"]:
                del chosen["bad_words_ids"]
    return chosen


@st.composite
def cases(draw, sampling: bool = False) -> Case:
    """A random generate() call; ``sampling``: with draft settings of do_sample=True."""
    arch = draw(st.sampled_from(ARCHS))
    rows = draw(st.integers(1, 4))
    longest = draw(st.one_of(st.integers(1, 12), st.integers(1, POSITIONS - 1)))  # short, and up to the limit
    prompts = tuple(tuple(draw(st.lists(tokens, min_size=1, max_size=longest))) for _ in range(rows - 1)) + (
        tuple(draw(st.lists(tokens, min_size=longest, max_size=longest))),
    )
    prompts = tuple(draw(st.permutations(prompts)))
    width = max(map(len, prompts))
    most = min(24, POSITIONS - width)
    new = draw(st.integers(min(8, most), most) | st.integers(1, most))  # mostly several blocks
    sometimes = lambda strategy: st.none() | st.none() | st.none() | strategy  # noqa: E731 (1 case in 4)
    eos = tuple(draw(st.just([]) | st.lists(tokens, min_size=1, max_size=3, unique=True)))
    case = Case(
        arch=arch,
        prompts=prompts,
        new=new,
        by_max_length=draw(st.booleans()),
        eos=eos,
        pad=draw(tokens),
        stop_after=draw(sometimes(st.integers(1, new))),
        stop_token=draw(sometimes(tokens)),
        processors=draw(processor_keywords(eos, width, new)),
        custom=tuple(draw(st.lists(st.sampled_from(sorted(CUSTOM_PROCESSORS)), max_size=2, unique=True))),
        h=draw(st.integers(2, 4)),
        k=draw(st.integers(1, 8)),
        p=draw(st.integers(1, 6)),
        alpha=draw(st.sampled_from([0.0, 0.5, 1.0, 3.0]) | st.floats(0.0, 5.0)),
        verify=draw(st.sampled_from(["tree", "batch"])),
        lookup=draw(st.sampled_from([0, 0, 1, 2, 3])),
        lookup_tokens=draw(st.integers(1, 8)),
        use_lm=draw(st.booleans()),
    )
    if sampling:
        case.sample_rule = draw(st.sampled_from(["multi", "tree", "block", "token"]))
        if case.sample_rule not in ("multi", "tree"):
            case.lookup = 0  # the copied draft joins several drafts only
        case.sample_alpha = draw(st.sampled_from([0.0, 0.2, 1.0]))
        case.temperature = draw(st.sampled_from([0.5, 1.0, 1.7]))
        case.top_p = draw(st.none() | st.sampled_from([0.5, 0.9]))
    return case
