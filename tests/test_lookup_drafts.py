"""Context-copy (prompt lookup) drafts added to the lattice's: greedy output stays generate()'s."""

from __future__ import annotations

import random

import pytest
import torch

import draftlattice.hf as dlhf
from _hf_models import MODELS, greedy, left_padded, own_ngram
from draftlattice.decode.drafters.lookup import continuation
from draftlattice.decode.recording import StepRecorder

pytestmark = pytest.mark.usefixtures("one_thread")

# Prompts that repeat themselves, so that copies are found (and some are right).
PROMPTS = [[3, 4, 5, 6, 3, 4], [7, 8, 9, 7, 8], [1, 2, 1, 2, 1], [10, 20, 30, 40, 10, 20, 30], [5, 6]]


def naive_continuation(context, max_ngram, length):
    """The definition, spelled out: longest n; the latest start followed by ``length`` tokens,
    else the earliest start."""
    for n in range(max_ngram, 0, -1):
        if n >= len(context):
            continue
        starts = [s for s in range(len(context) - n) if context[s : s + n] == context[-n:]]
        full = [s for s in starts if s + n + length <= len(context)]
        if starts:
            start = full[-1] if full else starts[0]
            return context[start + n : start + n + length]
    return []


def test_continuation_cases():
    assert continuation([1, 2, 3, 9, 1, 2], 3, 4) == [3, 9, 1, 2]
    assert continuation([1, 2, 3, 9, 1, 2], 3, 2) == [3, 9]
    assert continuation([5, 1, 7, 1], 3, 4) == [7, 1]  # only the 1-gram matches
    assert continuation([1, 2, 3], 3, 4) == []  # nothing occurs twice
    assert continuation([4], 3, 4) == [] and continuation([], 3, 4) == []
    # The most recent occurrence followed by `length` tokens wins over an earlier one ...
    assert continuation([1, 2, 8, 1, 2, 9, 1, 2], 2, 1) == [9]
    # ... else the earliest (the longest continuation): periodic contexts copy whole periods.
    assert continuation([7, 7, 7, 7], 2, 3) == [7, 7]
    assert continuation([1, 2, 8, 1, 2, 9, 1, 2], 2, 4) == [8, 1, 2, 9]
    # A longer match wins over a more recent shorter one.
    assert continuation([6, 1, 2, 8, 5, 2, 7, 6, 1, 2], 3, 1) == [8]


def test_continuation_equals_a_naive_search():
    rng = random.Random(7)
    for _ in range(3000):
        context = [rng.randrange(4) for _ in range(rng.randrange(0, 14))]
        max_ngram, length = rng.randrange(1, 5), rng.randrange(1, 7)
        assert continuation(context, max_ngram, length) == naive_continuation(context, max_ngram, length), (
            context,
            max_ngram,
            length,
        )


@pytest.fixture(scope="module", params=sorted(MODELS))
def setup(request, tmp_path_factory):
    model = MODELS[request.param]()
    heads = dlhf.DraftHeads.for_model(model, horizon=3)
    return model, heads, own_ngram(model, tmp_path_factory.mktemp(request.param), PROMPTS)


def lookup_generate(model, ids, mask, heads, **kwargs):
    kwargs.setdefault("draft_verify", "tree")
    kwargs.setdefault("do_sample", False)
    with torch.inference_mode():
        return model.generate(
            ids,
            attention_mask=mask,
            custom_generate=dlhf.generate,
            draft_heads=heads,
            return_dict_in_generate=True,
            pad_token_id=0,
            eos_token_id=None,
            **kwargs,
        )


@pytest.mark.parametrize("use_lm", [False, True])
def test_lookup_equals_greedy_generate(setup, use_lm):
    """Batch 1 and left-padded batches, copies longer than the heads' drafts (g = 2 here)."""
    model, heads, lm = setup
    for i, prompt in enumerate(PROMPTS):
        for new in (1, 6, 17):
            ids = torch.tensor([prompt])
            expected = greedy(model, ids, max_new_tokens=new)
            drafting = {"draft_lm": lm if use_lm else None, "draft_p": 1 + i % 3, "draft_lookup": 1 + i % 3}
            out = lookup_generate(model, ids, None, heads, max_new_tokens=new, draft_lookup_tokens=5, **drafting)
            assert out.sequences.tolist() == expected.tolist(), (prompt, new)
    for rows in ([0, 1, 4], [2, 3]):
        ids, mask = left_padded([PROMPTS[r] for r in rows])
        expected = greedy(model, ids, mask, max_new_tokens=15)
        out = lookup_generate(
            model, ids, mask, heads, max_new_tokens=15, draft_lm=lm if use_lm else None, draft_lookup=3
        )
        assert out.sequences.tolist() == expected.tolist(), rows


def test_copies_longer_than_the_heads_drafts_are_accepted():
    """A model whose greedy output repeats one token (constant final state): once the token has
    been seen twice, the copied draft is the full ``draft_lookup_tokens`` and all of it is accepted,
    more than the heads' g = 2 tokens."""
    model = MODELS["gpt2"]()
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.normal_(generator=torch.Generator().manual_seed(5))
    heads = dlhf.DraftHeads.for_model(model, horizon=3)
    with torch.no_grad():  # heads that draft something else: only the copies can be accepted
        for head in heads.heads:
            head.down.bias.normal_(generator=torch.Generator().manual_seed(1))
    ids = torch.tensor([[1, 2, 3]])
    expected = greedy(model, ids, max_new_tokens=20)
    out = lookup_generate(model, ids, None, heads, max_new_tokens=20, draft_lookup=2, draft_lookup_tokens=5)
    assert out.sequences.tolist() == expected.tolist()
    assert max(a for step in out.draft_stats.accepted for a in step) == 5


def test_lookup_in_chains_equals_greedy_generate(setup):
    """The batch layout pads shorter drafts (a deterministic token keeps greedy acceptance exact)."""
    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[0], PROMPTS[2], PROMPTS[3]])
    expected = greedy(model, ids, mask, max_new_tokens=14)
    out = lookup_generate(
        model, ids, mask, heads, max_new_tokens=14, draft_lm=lm, draft_p=2, draft_lookup=2, draft_verify="batch"
    )
    assert out.sequences.tolist() == expected.tolist()


def test_lookup_samples_with_the_tree_rule(setup):
    """Sampling with the tree rule takes the copied draft (seeded: the same draws twice)."""
    model, heads, lm = setup
    ids = torch.tensor([PROMPTS[1]])
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        out = lookup_generate(
            model,
            ids,
            None,
            heads,
            max_new_tokens=12,
            draft_lm=lm,
            do_sample=True,
            draft_sample="tree",
            draft_lookup=3,
            draft_lookup_tokens=5,
        )
        runs.append(out.sequences.tolist())
    assert runs[0] == runs[1] and len(runs[0][0]) == ids.shape[1] + 12


def test_lookup_is_refused_where_it_cannot_work(setup):
    model, heads, _ = setup
    ids = torch.tensor([[1, 2, 1, 2]])
    for rule in ("block", "token"):
        with pytest.raises(ValueError, match="draft_lookup joins several drafts"):
            lookup_generate(
                model, ids, None, heads, max_new_tokens=4, draft_lookup=2, do_sample=True, draft_sample=rule
            )
    with pytest.raises(ValueError, match="draft_lookup must be a positive int"):
        lookup_generate(model, ids, None, heads, max_new_tokens=4, draft_lookup=-2)
    with pytest.raises(ValueError, match="draft_lookup_tokens must be a positive int"):
        lookup_generate(model, ids, None, heads, max_new_tokens=4, draft_lookup=2, draft_lookup_tokens=0)


def test_recorded_drafts_drop_the_padding(setup):
    """The report's recorder sees each verified draft at its own length (no -1 tokens)."""
    model, heads, _ = setup
    recorder = StepRecorder(k=4)
    ids = torch.tensor([PROMPTS[3]])
    lookup_generate(
        model,
        ids,
        None,
        heads,
        max_new_tokens=12,
        draft_p=2,
        draft_lookup=3,
        draft_lookup_tokens=6,
        draft_recorder=recorder,
    )
    drafts = [d for step in recorder.steps[0] for d in step.drafts_before]
    assert recorder.steps[0] and all(t >= 0 for d in drafts for t in d)
    assert all(all(t >= 0 for d in step.drafts_after or [] for t in d) for step in recorder.steps[0])


def test_the_copy_alone_equals_greedy_generate(setup):
    """draft_heads=None: the context's copy is the only draft, no heads run; steps without a copy
    verify the root alone. Batch 1 (every prompt, several lengths) and left-padded batches."""
    model, _, _ = setup
    for prompt in PROMPTS:
        for new in (1, 9, 17):
            ids = torch.tensor([prompt])
            out = lookup_generate(model, ids, None, None, max_new_tokens=new, draft_lookup=3, draft_lookup_tokens=4)
            assert out.sequences.tolist() == greedy(model, ids, max_new_tokens=new).tolist(), (prompt, new)
    for rows in ([0, 1, 4], [2, 3]):
        ids, mask = left_padded([PROMPTS[r] for r in rows])
        out = lookup_generate(model, ids, mask, None, max_new_tokens=15, draft_lookup=2)
        assert out.sequences.tolist() == greedy(model, ids, mask, max_new_tokens=15).tolist(), rows


def test_the_copy_alone_accepts_copies_and_runs_no_heads(monkeypatch):
    """The repeating model of the test above: with no heads at all, every accepted token after
    the first copies comes from the context, and a step without a copy is one node."""
    from draftlattice.decode import engine as engine_module

    model = MODELS["gpt2"]()
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.normal_(generator=torch.Generator().manual_seed(5))
    monkeypatch.setattr(engine_module, "draft_head_logits", lambda *a: pytest.fail("no heads may run"))
    ids = torch.tensor([[1, 2, 3]])
    out = lookup_generate(model, ids, None, None, max_new_tokens=20, draft_lookup=2, draft_lookup_tokens=5)
    assert out.sequences.tolist() == greedy(model, ids, max_new_tokens=20).tolist()
    stats = out.draft_stats
    assert max(a for step in stats.accepted for a in step) == 5
    assert stats.target_calls < 20 // 2  # most tokens came from copies
    assert stats.nodes < stats.target_calls * 6  # root-only steps where nothing was copied yet


def test_the_copy_alone_is_refused_where_it_cannot_work(setup):
    model, _, lm = setup
    ids = torch.tensor([[1, 2, 1, 2]])
    cases = [
        ({"do_sample": True}, r"with do_sample=True use draft_sample='tree' \(got 'multi'\)"),
        ({"draft_lm": lm}, "draft_lm rescores the heads' lattice: it needs draft_heads"),
        ({"draft_verify": "batch"}, "draft_verify='tree', not 'batch'"),
        ({"draft_lookup": 0}, "draft_heads is required"),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            lookup_generate(model, ids, None, None, max_new_tokens=4, **{"draft_lookup": 2, **extra})
    from draftlattice.decode import Engine
    from draftlattice.decode.drafters.lookup import ContextLookup
    from draftlattice.decode.recording import StepRecorder as Recorder

    with pytest.raises(ValueError, match="verified as tree, not 'batch'"):
        Engine(model, None, ContextLookup(None), layout="batch")
    with pytest.raises(ValueError, match="an observer records the heads' drafts"):
        Engine(model, None, ContextLookup(None), observer=Recorder(k=2))
    with pytest.raises(TypeError, match="heads must be draft heads"):
        Engine(model, None, ContextLookup(object.__new__(type("D", (), {"p": 1}))))


def test_datastore_drafts_equal_greedy_generate(setup):
    """A datastore of the model's own greedy outputs drafts where the context has no copy: the
    output stays generate()'s, alone or joined to the lattice's drafts, in fewer target calls."""
    from draftlattice import Datastore

    model, heads, lm = setup
    outputs = {tuple(p): greedy(model, torch.tensor([p]), max_new_tokens=17) for p in PROMPTS}
    store = Datastore.from_records([out[0].tolist() for out in outputs.values()], min_ngram=1)
    calls = {"plain": 0, "store": 0}
    for prompt in PROMPTS:
        ids, expected = torch.tensor([prompt]), outputs[tuple(prompt)].tolist()
        for label, extra in (("plain", {}), ("store", {"draft_datastore": store})):
            out = lookup_generate(model, ids, None, None, max_new_tokens=17, draft_lookup=2, **extra)
            assert out.sequences.tolist() == expected, (prompt, label)
            calls[label] += out.draft_stats.target_calls
        joined = lookup_generate(
            model, ids, None, heads, max_new_tokens=17, draft_lm=lm, draft_p=2, draft_lookup=2, draft_datastore=store
        )
        assert joined.sequences.tolist() == expected, prompt
    assert calls["store"] < calls["plain"]


def test_datastore_is_refused_where_it_cannot_work(setup):
    from draftlattice import Datastore

    model, heads, _ = setup
    ids = torch.tensor([[1, 2, 1, 2]])
    store = Datastore.from_records([[1, 2, 3]], max_length=4)
    cases = [
        ({"draft_datastore": store}, "it needs draft_lookup"),
        ({"draft_lookup": 2, "draft_datastore": [[1, 2, 3]]}, "must be a draftlattice.Datastore, got list"),
        ({"draft_lookup": 2, "draft_datastore": store, "draft_lookup_tokens": 6}, "max_length"),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            lookup_generate(model, ids, None, heads, max_new_tokens=4, **extra)


def test_a_retrieval_branch_beside_the_copy_keeps_greedy_output(setup):
    """``draft_retrieval``: where the context has a copy, the datastore's continuation is one more
    branch of the tree (alone, joined to the lattice, in chains, in left-padded batches)."""
    from draftlattice import Datastore

    model, heads, lm = setup
    outputs = {tuple(p): greedy(model, torch.tensor([p]), max_new_tokens=17) for p in PROMPTS}
    store = Datastore.from_records([out[0].tolist() for out in outputs.values()], min_ngram=1)
    for prompt in PROMPTS:
        ids, expected = torch.tensor([prompt]), outputs[tuple(prompt)].tolist()
        alone = lookup_generate(
            model, ids, None, None, max_new_tokens=17, draft_lookup=2, draft_datastore=store, draft_retrieval=3
        )
        assert alone.sequences.tolist() == expected, prompt
        for verify in ("tree", "batch"):
            joined = lookup_generate(
                model,
                ids,
                None,
                heads,
                max_new_tokens=17,
                draft_lm=lm,
                draft_p=2,
                draft_lookup=2,
                draft_datastore=store,
                draft_retrieval=4,
                draft_verify=verify,
            )
            assert joined.sequences.tolist() == expected, (prompt, verify)
        prefixes = lookup_generate(  # a tree of the lattice's best prefixes: as many drafts as leaves
            model,
            ids,
            None,
            heads,
            max_new_tokens=17,
            draft_nodes=5,
            draft_lookup=2,
            draft_datastore=store,
            draft_retrieval=3,
        )
        assert prefixes.sequences.tolist() == expected, prompt
    ids, mask = left_padded([PROMPTS[0], PROMPTS[2], PROMPTS[3]])
    out = lookup_generate(
        model, ids, mask, heads, max_new_tokens=14, draft_lookup=2, draft_datastore=store, draft_retrieval=2
    )
    assert out.sequences.tolist() == greedy(model, ids, mask, max_new_tokens=14).tolist()


def test_the_retrieval_branch_is_drafted_only_beside_a_copy_and_where_it_differs():
    from draftlattice import Datastore
    from draftlattice.decode.drafters.lookup import ContextLookup

    store = Datastore.from_records([[1, 2, 9, 9, 9], [5, 6, 7, 8]] * 2, min_ngram=1)  # min_count 2
    lookup = ContextLookup(None, 2, 3, store, retrieval=2)
    assert lookup.p == 2
    assert lookup.copies([1, 2, 3, 1, 2]) == [[3, 1, 2], [9, 9]]  # the copy, then the retrieval
    assert lookup.copies([5, 6, 7, 4, 5, 6]) == [[7, 4, 5], [7, 8]]  # they part after one token
    assert lookup.copies([5, 6, 7, 8, 1, 5, 6]) == [[7, 8, 1]]  # the retrieval is the copy's prefix
    assert lookup.copies([4, 5, 6]) == [[7, 8]]  # no copy: the retrieval alone, as long as a copy
    assert lookup.copies([40, 41]) == []
    plain = ContextLookup(None, 2, 3, store)
    assert plain.p == 1 and plain.copies([1, 2, 3, 1, 2]) == [[3, 1, 2]]
    drafts, _ = lookup.finish(None, [], [[1, 2, 3, 1, 2], [40, 41]], torch.device("cpu"))
    assert drafts.tolist() == [[[3, 1, 2], [9, 9, -1]], [[-1, -1, -1], [-1, -1, -1]]]


def test_retrieval_is_refused_where_it_cannot_work(setup):
    from draftlattice import Datastore
    from draftlattice.decode.drafters.lookup import ContextLookup

    model, heads, _ = setup
    ids = torch.tensor([[1, 2, 1, 2]])
    store = Datastore.from_records([[1, 2, 3]], max_length=4)
    cases = [
        ({"draft_lookup": 2, "draft_retrieval": 2}, "draft_retrieval .* it needs draft_datastore"),
        (
            {"draft_lookup": 2, "draft_datastore": store, "draft_retrieval": 5, "draft_lookup_tokens": 3},
            "fewer than draft_retrieval=5",
        ),
        (
            {"draft_lookup": 2, "draft_datastore": store, "draft_retrieval": -1, "draft_lookup_tokens": 3},
            "draft_retrieval must be a non-negative int",
        ),
        (
            {
                "draft_lookup": 2,
                "draft_datastore": store,
                "draft_retrieval": 2,
                "do_sample": True,
                "draft_lookup_tokens": 3,
            },
            "draft_retrieval adds a deterministic draft: with do_sample=True use draft_sample='tree'",
        ),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            lookup_generate(model, ids, None, heads, max_new_tokens=4, **extra)
    with pytest.raises(ValueError, match="retrieval .* it needs a datastore"):
        ContextLookup(None, 2, 3, retrieval=2)
    with pytest.raises(ValueError, match="retrieval must be a non-negative int, got True"):
        ContextLookup(None, 2, 3, store, retrieval=True)
