"""Sampling with the engine is lossless: its output law is the target's own sampling law.

Monte-Carlo law test on a tiny vocabulary (V = 6): many rows of one prompt in one engine run, the
empirical law of the 3 new tokens against the exact law enumerated from the model (one batched
forward over all 216 continuations) with generate()'s warpers, by a chi-square test. This adds to
tests/test_hf_sampling.py (the rules "multi", "tree" and "block" through ``generate()`` with
temperature and top-k) what it lacks: the "token" rule, top-p, the "multi" rule with one draft,
sampled drafts of an n-gram LM's lattice whose top-k support is below k, left-padded rows in a
batch with longer prompts, a drafter that misreports q under the one-draft rules (the test has
power), top_k=1 (a point mass) giving greedy generate()'s output with the "token" rule, and the
drafts' law against transformers' warpers.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from _hf_models import disagreeing_heads, misreporting_propose, ngram_over, peaked_model_and_heads
from _laws import law_p_value
from draftlattice.decode import ContextLookup, Engine, LatticeDrafter, RowStopper, Sampling
from draftlattice.decode.drafters import SampledDrafts
from draftlattice.verify import sampling_distribution

pytestmark = pytest.mark.usefixtures("one_thread")

V, NEW = 6, 3
PROMPT = [1, 2, 3]
ROWS = 6000


def peaked_model():
    return peaked_model_and_heads(V)


def exact_law(model, sampling: Sampling) -> dict[tuple[int, ...], float]:
    """P(x1 x2 x3 | prompt) under the warpers, every continuation in one forward."""
    continuations = list(itertools.product(range(V), repeat=NEW))
    batch = torch.tensor([PROMPT + list(c) for c in continuations])
    with torch.inference_mode():
        logits = model(batch).logits[:, len(PROMPT) - 1 : -1].double()  # [216, NEW, V]
    probs = sampling_distribution(logits, sampling.temperature, sampling.top_k, sampling.top_p)
    steps = probs.gather(-1, batch[:, len(PROMPT) :, None]).squeeze(-1)
    return {c: float(p) for c, p in zip(continuations, steps.prod(-1))}


def engine_counts(model, heads, drafter, rule: str, sampling: Sampling, seed: int, layout: str = "tree"):
    """ROWS rows of PROMPT decoded in one engine run: counts of each continuation, and the stats."""
    torch.manual_seed(seed)
    engine = Engine(
        model, heads, drafter, layout=layout, sample_rule=rule, sampling=sampling, processors=sampling.processors()
    )
    ids = torch.tensor([PROMPT] * ROWS)
    tokens, stats = engine.run(ids, RowStopper(ids, NEW, set(), [], 0), max_length=len(PROMPT) + NEW)
    counts: dict[tuple[int, ...], int] = {}
    for row in tokens:
        counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    return counts, stats


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    """A bigram LM over the 6 token ids (drafts of its lattice differ from the heads' own)."""
    return ngram_over(
        tmp_path_factory.mktemp("engine-sampling"), [[(3 * i + j) % V for j in range(12)] for i in range(V)], order=2
    )


CASES = [  # rule, LM, drafts per step (p), lattice k, warpers
    ("token", False, 1, 4, Sampling(temperature=0.8, top_k=5)),
    ("token", True, 1, 4, Sampling(top_p=0.8)),
    ("block", True, 1, 4, Sampling(temperature=1.2, top_p=0.9)),
    ("multi", True, 1, 4, Sampling(temperature=0.8, top_k=5)),  # one draft: block verification
    ("multi", False, 3, 4, Sampling(top_p=0.9)),
    ("multi", True, 3, 4, Sampling(top_k=3)),  # top-k support (3) below the lattice's k (4)
]


@pytest.mark.parametrize(("rule", "use_lm", "p", "k", "sampling"), CASES)
def test_sampling_preserves_the_target_law(lm, rule, use_lm, p, k, sampling):
    model, heads = peaked_model()
    drafter = LatticeDrafter(lm if use_lm else None, k=k, p=p, alpha=1.0, sample_alpha=1.0)
    counts, stats = engine_counts(model, heads, drafter, rule, sampling, seed=11)
    assert stats.new_tokens == ROWS * NEW
    assert 0 < stats.mean_accepted < 2  # some drafts accepted, some rejected
    assert law_p_value(exact_law(model, sampling), counts) > 1e-3


@pytest.mark.parametrize("layout", ["tree", "batch"])
@pytest.mark.parametrize("rule", ["multi", "tree"])
def test_several_drafts_keep_the_law_verified_as_a_tree_or_as_chains(lm, rule, layout):
    """p drafts per step (sampled, or the p best for the tree rule) verified over their trie
    (shared prefixes once, the rules reading it as chains) or as p chains (the cache repeated)."""
    model, heads = peaked_model()
    sampling = Sampling(temperature=0.9, top_k=5)
    drafter = LatticeDrafter(lm, k=4, p=3, alpha=1.0, sample_alpha=1.0)
    counts, stats = engine_counts(model, heads, drafter, rule, sampling, seed=17, layout=layout)
    assert stats.new_tokens == ROWS * NEW
    assert 0 < stats.mean_accepted < 2
    assert law_p_value(exact_law(model, sampling), counts) > 1e-3


@pytest.mark.parametrize("layout", ["tree", "batch"])
@pytest.mark.parametrize("use_lm", [True, False])
def test_a_tree_of_the_best_prefixes_keeps_the_law_with_the_tree_rule(lm, layout, use_lm):
    """The tree rule on the lattice's best prefixes (paths of different lengths, -1 padded): as
    chains, padded by repeating their last token; as their trie, as short as drafted (the root
    and at most 5 prefix nodes a row)."""
    model, heads = peaked_model()
    sampling = Sampling(temperature=0.9, top_k=5)
    drafter = LatticeDrafter(lm if use_lm else None, k=4, alpha=1.0, nodes=5)
    counts, stats = engine_counts(model, heads, drafter, "tree", sampling, seed=29, layout=layout)
    steps = stats.target_calls - stats.prefill_calls
    assert (stats.nodes <= 6 * steps) == (layout == "tree")
    assert stats.new_tokens == ROWS * NEW
    assert 0 < stats.mean_accepted < 2
    assert law_p_value(exact_law(model, sampling), counts) > 1e-3


@pytest.mark.parametrize("store", [False, True])
@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_sampled_drafts_joined_by_a_copied_draft_keep_the_law(lm, layout, store):
    """p sampled drafts and one copied from the context (one-hot law), recursive rejection: rows
    whose context repeats a token get the copy, the others one more sampled draft; with a
    datastore, rows without a copy of their own get the datastore's where it has one."""
    from draftlattice import Datastore

    model, heads = peaked_model()
    sampling = Sampling(temperature=0.9, top_k=5)
    rng = torch.Generator().manual_seed(5)
    records = [torch.randint(0, V, (40,), generator=rng).tolist() for _ in range(8)]
    datastore = Datastore.from_records(records, min_ngram=1) if store else None
    retrieved = []
    if store:  # count the drafts it gives: the test must exercise them
        query = datastore.continuation
        datastore.continuation = lambda context, length: retrieved.append(query(context, length)) or retrieved[-1]
    inner = LatticeDrafter(lm, k=4, p=2, alpha=1.0, sample_alpha=1.0)
    drafter = ContextLookup(inner, max_ngram=2, datastore=datastore)
    counts, stats = engine_counts(model, heads, drafter, "multi", sampling, seed=23, layout=layout)
    assert not store or sum(map(bool, retrieved)) > 100
    assert stats.new_tokens == ROWS * NEW
    assert 0 < stats.mean_accepted < 2
    assert law_p_value(exact_law(model, sampling), counts) > 1e-3


def test_the_copy_alone_keeps_the_law_with_the_tree_rule():
    """The context's copy as the only draft (no heads), sampled by the tree rule: a fixed tree a
    step, the root alone where the context has no copy. Prompts that repeat themselves, so that
    copies are drafted and taken."""
    model, _ = peaked_model()
    sampling = Sampling(temperature=0.9, top_k=5)
    counts, stats = engine_counts(model, None, ContextLookup(None, max_ngram=2, length=2), "tree", sampling, seed=37)
    assert stats.new_tokens == ROWS * NEW
    assert 0 < stats.mean_accepted < 2  # copies were drafted and some taken
    assert law_p_value(exact_law(model, sampling), counts) > 1e-3


@pytest.mark.parametrize("rule", ["multi", "tree"])
def test_the_datastores_draft_beside_the_copy_keeps_the_law(lm, rule):
    """``retrieval``: the tree rule verifies the copy and the datastore's draft beside it as fixed
    branches; recursive rejection ("multi") drops the draw drawn for that branch (the copy alone
    joins sampled drafts). Either way the output law is the target's."""
    from draftlattice import Datastore

    model, heads = peaked_model()
    sampling = Sampling(temperature=0.9, top_k=5)
    rng = torch.Generator().manual_seed(6)
    records = [torch.randint(0, V, (40,), generator=rng).tolist() for _ in range(8)]
    datastore = Datastore.from_records(records, min_ngram=1, min_count=1)
    beside = []
    inner = LatticeDrafter(lm, k=4, p=2, alpha=1.0, sample_alpha=1.0)
    drafter = ContextLookup(inner, max_ngram=2, length=3, datastore=datastore, retrieval=2)
    copies = drafter.copies
    drafter.copies = lambda context: beside.append(len(copies(context)) == 2) or copies(context)
    counts, stats = engine_counts(model, heads, drafter, rule, sampling, seed=31, layout="tree")
    assert rule == "multi" or sum(beside) > 100  # the tree rule verified the second branch
    assert stats.new_tokens == ROWS * NEW
    assert law_p_value(exact_law(model, sampling), counts) > 1e-3


def test_a_copied_draft_replaces_the_extra_sampled_draft_where_the_context_has_one():
    q = torch.full((2, 3, 2, 5), 0.2).expand(2, 3, 2, 5)  # a view, as the heads' own law is
    sampled = SampledDrafts(torch.tensor([[[0, 1], [2, 3], [4, 0]], [[1, 1], [2, 2], [3, 3]]]), q)
    tokens, joined = ContextLookup(LatticeDrafter(k=2, p=2), max_ngram=2)._join_sampled(
        sampled,
        [[4, 1, 2, 4], [0, 1, 2, 3]],  # row 0: "4" recurs, followed by "1 2"; row 1: no copy
    )
    # The copy first, then the sampled drafts; without a copy, the extra sampled draft first.
    assert tokens.tolist() == [[[1, 2], [0, 1], [2, 3]], [[3, 3], [1, 1], [2, 2]]]
    assert torch.equal(joined.q[0, 0], torch.eye(5)[[1, 2]]) and torch.equal(joined.q[1], q[1])
    assert torch.equal(joined.q[0, 1:], q[0, :2])
    none, alone = ContextLookup(LatticeDrafter(k=2, p=2))._join_sampled(sampled, [[0, 1], [2, 3]])
    assert none.shape == (2, 2, 2) and alone.q.shape == (2, 2, 2, 5)  # no copy: the p drafts


@pytest.mark.parametrize("rule", ["multi", "tree"])
def test_the_tree_layout_samples_what_the_chains_sample(lm, rule):
    """Same seed, float32: verifying the drafts over their trie gives the chains' very tokens and
    acceptances (equal laws at every node, the same draws in the same order), so nothing the law
    test cannot see (e.g. the heads reading another node's state next step) differs either."""
    model, heads = peaked_model()
    sampling = Sampling(temperature=0.9, top_k=5)
    ids = torch.tensor([PROMPT] * 500)
    runs = {}
    for layout in ("tree", "batch"):
        torch.manual_seed(23)
        drafter = LatticeDrafter(lm, k=4, p=3, alpha=1.0, sample_alpha=1.0)
        engine = Engine(
            model, heads, drafter, layout=layout, sample_rule=rule, sampling=sampling, processors=sampling.processors()
        )
        runs[layout] = engine.run(ids, RowStopper(ids, 8, set(), [], 0), max_length=len(PROMPT) + 8)
    (tree_tokens, tree_stats), (chain_tokens, chain_stats) = runs["tree"], runs["batch"]
    assert tree_tokens == chain_tokens
    assert tree_stats.accepted == chain_stats.accepted
    assert 0 < tree_stats.mean_accepted < 3


@pytest.mark.parametrize("rule", ["multi", "token"])
def test_left_padded_rows_keep_the_target_law(lm, rule):
    """PROMPT's rows, left-padded in a batch with longer prompts (rows accept different lengths,
    the cache has holes), still sample the target's law."""
    from _hf_models import left_padded

    model, heads = peaked_model()
    sampling = Sampling(temperature=0.8, top_k=5)
    drafter = LatticeDrafter(lm if rule == "multi" else None, k=4, p=3 if rule == "multi" else 1, sample_alpha=1.0)
    engine = Engine(model, heads, drafter, sample_rule=rule, sampling=sampling, processors=sampling.processors())
    ids, mask = left_padded([PROMPT] * ROWS + [[4, 0, 5, 2, 1, 1]] * (ROWS // 2))
    torch.manual_seed(1)
    tokens, stats = engine.run(
        ids, RowStopper(ids, NEW, set(), [], 0), attention_mask=mask, max_length=ids.shape[1] + NEW
    )
    assert any(len(set(step)) > 1 for step in stats.accepted)
    counts: dict[tuple[int, ...], int] = {}
    for row in tokens[:ROWS]:
        counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    assert law_p_value(exact_law(model, sampling), counts) > 1e-3


@pytest.mark.parametrize("rule", ["token", "block"])
def test_a_drafter_that_misreports_q_is_detected(monkeypatch, rule):
    """The law test catches one-draft rules fed a q that is not the law the draft came from."""
    monkeypatch.setattr(LatticeDrafter, "propose", misreporting_propose(V))
    model, heads = peaked_model()
    sampling = Sampling(temperature=0.8, top_k=5)
    counts, _ = engine_counts(model, heads, LatticeDrafter(None, k=4, p=1), rule, sampling, seed=13)
    assert law_p_value(exact_law(model, sampling), counts) < 1e-3


@pytest.mark.parametrize("use_lm", [False, True])
def test_top_k_1_with_the_token_rule_is_greedy_on_padded_batches(tmp_path, use_lm):
    """top_k=1 makes the target law a point mass: the token rule (sampled drafts, padded rows,
    EOS, repetition penalty) must then give greedy generate()'s output."""
    from transformers import LogitsProcessorList, RepetitionPenaltyLogitsProcessor, TopKLogitsWarper

    from _hf_models import greedy, left_padded, qwen2

    model = qwen2()
    heads = disagreeing_heads(model, horizon=4, seed=6)
    lm = ngram_over(tmp_path, [[(5 * i + j) % 48 for j in range(12)] for i in range(48)]) if use_lm else None
    ids, mask = left_padded([[3, 4, 5], [7, 7, 7, 7, 9], [1]])
    for penalty, eos in ((None, ()), (1.3, ()), (None, (5, 9))):
        expected = greedy(
            model, ids, mask, max_new_tokens=12, repetition_penalty=penalty, eos_token_id=list(eos) or None
        )
        processors = LogitsProcessorList([RepetitionPenaltyLogitsProcessor(penalty)] if penalty else [])
        processors.append(TopKLogitsWarper(1))
        engine = Engine(
            model,
            heads,
            LatticeDrafter(lm, k=4, p=1),
            sample_rule="token",
            sampling=Sampling(top_k=1),
            processors=processors,
        )
        stopper = RowStopper(ids, 12, set(eos), [], 0)
        tokens, _ = engine.run(ids, stopper, attention_mask=mask, max_length=ids.shape[1] + 12)
        assert stopper.output(ids, tokens).tolist() == expected.tolist(), (penalty, eos)


@pytest.mark.parametrize(
    "T,top_k,top_p", [(1.0, None, None), (0.7, 5, None), (1.3, None, 0.8), (0.5, 7, 0.6), (2.0, 3, 0.99)]
)
def test_the_drafts_law_matches_transformers_warpers(T, top_k, top_p):
    """The drafter's q and the exact laws above use sampling_distribution; the engine's target
    law comes from generate()'s warpers: the two are the same law."""
    logits = torch.randn(4, 20, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2
    ids = torch.zeros(4, 1, dtype=torch.int64)
    expected = Sampling(T, top_k, top_p).processors()(ids, logits.clone()).softmax(-1)
    torch.testing.assert_close(sampling_distribution(logits, T, top_k, top_p), expected)
