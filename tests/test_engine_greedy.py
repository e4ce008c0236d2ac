"""Greedy decoding with the engine equals transformers' greedy generate(), for every drafter.

The engine runs directly here (tests/test_hf_generate.py covers the same through
``model.generate(custom_generate=...)``): a float32 Llama with trained heads (tests/_engine_models.py),
every drafter (the heads' p-best lattice paths, n-gram rescored lattices with several k, p and
alpha, trees of their best nodes, neural rescoring, the oracle), both verification layouts, horizons 2 and 4, left-padded batches, EOS inside a
block; the cache is rolled back to exactly the committed tokens (the heads' logits at every step
equal a fresh forward), and the p-best drafts of a rescored lattice are the brute-force best.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from _engine_models import PROMPTS, Recording, run, trained, unpadded
from _hf_models import greedy, left_padded, llama, own_ngram
from draftlattice.decode import Engine, LatticeDrafter, NeuralDrafter, OracleDrafter
from draftlattice.decode.drafters import to_host

NEW_TOKENS = 24
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    model, heads = trained()
    return model, heads, own_ngram(model, tmp_path_factory.mktemp("engine-greedy"), PROMPTS)


def drafters(lm, references, model):
    yield LatticeDrafter(None, k=2, p=1)
    yield LatticeDrafter(None, k=3, p=4)
    yield LatticeDrafter(lm, k=2, p=1, alpha=0.5)
    yield LatticeDrafter(lm, k=3, p=4, alpha=1.0)
    yield LatticeDrafter(lm, k=4, p=2, alpha=0.0)
    yield LatticeDrafter(lm, k=8, p=3, alpha=3.0)
    yield LatticeDrafter(None, k=3, nodes=5)  # trees of the best nodes
    yield LatticeDrafter(lm, k=4, nodes=9, alpha=0.5)
    yield NeuralDrafter(llama(seed=9), k=3, alpha=1.0)  # an unrelated small LM
    yield NeuralDrafter(model, k=4, alpha=5.0, window=6)  # the target itself, on a short window
    yield OracleDrafter(references, k=3)


@pytest.mark.parametrize("h", [2, 4])
@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_every_drafter_reproduces_greedy_generate(setup, h, layout):
    model, heads, lm = setup
    heads = heads.truncated(h)
    sizes = torch.zeros(h + 1, dtype=torch.int64)
    for prompt in PROMPTS[:3]:
        ids = torch.tensor([prompt])
        expected = greedy(model, ids, max_new_tokens=NEW_TOKENS)[0, len(prompt) :].tolist()
        for drafter in drafters(lm, [prompt + expected], model):
            tokens, stats, _ = run(Engine(model, heads, drafter, layout=layout), ids, NEW_TOKENS)
            assert tokens == [expected], (drafter.name, getattr(drafter, "k", None), prompt)
            assert stats.new_tokens == NEW_TOKENS
            assert stats.prefill_calls == 1
            assert stats.target_calls == stats.steps + 1 == sum(stats.block_sizes) + 1
            assert 1 + sum(n * c for n, c in enumerate(stats.block_sizes)) >= NEW_TOKENS  # the last block may be cut
            assert len(stats.block_sizes) <= h + 1  # at most h - 1 drafts + the target's token per step
            sizes[: len(stats.block_sizes)] += torch.tensor(stats.block_sizes)
    # The heads are trained so that both full acceptance and rejection occur.
    assert sizes[h] > 0 and sizes[1:h].sum() > 0, sizes.tolist()


@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_left_padded_batches_equal_greedy_generate(setup, layout):
    model, heads, lm = setup
    rows_differ = False
    for rows in ([0, 1, 3], [2, 4, 1, 0]):
        ids, mask = left_padded([PROMPTS[r] for r in rows])
        expected = greedy(model, ids, mask, max_new_tokens=NEW_TOKENS)
        references = [prompt + row for prompt, row in zip(unpadded(ids, mask), expected[:, ids.shape[1] :].tolist())]
        for drafter in drafters(lm, references, model):
            tokens, stats, out = run(Engine(model, heads, drafter, layout=layout), ids, NEW_TOKENS, mask)
            assert out.tolist() == expected.tolist(), (drafter.name, rows)
            assert stats.new_tokens == NEW_TOKENS * len(rows)
            rows_differ |= any(len(set(step)) > 1 for step in stats.accepted)
    assert rows_differ  # rows accepted different numbers of tokens in one forward (cache holes)


@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_eos_inside_a_block_stops_the_row_there(setup, layout):
    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[0], PROMPTS[3], PROMPTS[4]])
    plain = greedy(model, ids, mask, max_new_tokens=16)[:, ids.shape[1] :]
    hits = 0
    for eos in sorted(set(plain[:, 3:9].reshape(-1).tolist()))[:5]:  # tokens met mid-way
        for eos_ids in ([eos], [eos, (eos + 1) % model.config.vocab_size]):
            expected = greedy(model, ids, mask, max_new_tokens=16, eos_token_id=eos_ids, pad_token_id=0)
            for drafter in (LatticeDrafter(lm, k=4, p=3, alpha=2.0), LatticeDrafter(None, k=3, p=2)):
                tokens, stats, out = run(Engine(model, heads, drafter, layout=layout), ids, 16, mask, eos=eos_ids)
                assert out.tolist() == expected.tolist(), eos_ids
                for row in tokens:  # a stopped row ends with its EOS, which is counted
                    assert len(row) == 16 or row[-1] in eos_ids
                assert stats.new_tokens == sum(map(len, tokens))
            hits += sum(any(t in eos_ids for t in row[:-1]) for row in expected[:, ids.shape[1] :].tolist())
    assert hits > 0  # rows stopped by an EOS before the length limit while the others went on


@pytest.mark.parametrize("max_new", [1, 2, 3, 5])
@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_short_generations(setup, max_new, layout):
    model, heads, lm = setup
    ids = torch.tensor([PROMPTS[3]])
    expected = greedy(model, ids, max_new_tokens=max_new)
    for drafter in (LatticeDrafter(None, k=3, p=2), LatticeDrafter(lm, k=3, p=2, alpha=2.0)):
        tokens, stats, out = run(Engine(model, heads, drafter, layout=layout), ids, max_new)
        assert out.tolist() == expected.tolist()
        assert stats.target_calls <= max_new and stats.new_tokens == max_new


@pytest.mark.parametrize("layout", ["tree", "batch"])
@pytest.mark.parametrize("p", [1, 3])
def test_cache_is_rolled_back_to_the_committed_tokens(setup, layout, p, monkeypatch):
    """Every step's head logits (from the rolled-back cache, with holes and compaction) equal
    the heads at a fresh forward over the row's committed tokens; the contexts are the prompt
    (without padding), the output so far and the known next token."""
    import draftlattice.decode.engine as engine_module

    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[1], PROMPTS[2], PROMPTS[3]])
    prompts = unpadded(ids, mask)
    for compact_holes in (0.5, 0.0):  # the default, and compaction at every step
        monkeypatch.setattr(engine_module, "COMPACT_HOLES", compact_holes)
        drafter = Recording(LatticeDrafter(lm, k=3, p=p, alpha=2.0))
        expected = greedy(model, ids, mask, max_new_tokens=30)
        _, stats, out = run(Engine(model, heads, drafter, layout=layout), ids, 30, mask)
        assert out.tolist() == expected.tolist()
        assert any(len(set(step)) > 1 for step in stats.accepted)
        assert len(drafter.contexts) == stats.steps >= 5
        checked = 0
        for head_logits, contexts in zip(drafter.heads, drafter.contexts):
            for b, context in enumerate(contexts):
                new = len(context) - len(prompts[b])
                assert context == prompts[b] + expected[b, ids.shape[1] :].tolist()[:new]
                if new >= 30:
                    continue  # the row has finished: its heads are no longer read
                with torch.inference_mode():
                    hidden = model.base_model(input_ids=torch.tensor([context[:-1]])).last_hidden_state[0, -1]
                    fresh = heads.logits(hidden, model)
                torch.testing.assert_close(head_logits[b], fresh, rtol=1e-4, atol=1e-4)
                checked += 1
        assert checked >= 3 * 5


@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_several_drafts_match_and_need_no_more_steps(setup, layout):
    model, heads, lm = setup
    for prompt in PROMPTS[:3]:
        ids = torch.tensor([prompt])
        expected = greedy(model, ids, max_new_tokens=30)[0, len(prompt) :].tolist()
        one, one_stats, _ = run(Engine(model, heads, LatticeDrafter(lm, k=4, p=1, alpha=1.0), layout=layout), ids, 30)
        four, four_stats, _ = run(Engine(model, heads, LatticeDrafter(lm, k=4, p=4, alpha=1.0), layout=layout), ids, 30)
        assert one == four == [expected]
        assert four_stats.target_calls <= one_stats.target_calls


def test_lattice_drafts_are_the_exact_p_best_of_the_rescored_lattice(setup):
    """p-best drafts by brute force over all k**g drafts, scored with the LM's own scorer."""
    _, _, lm = setup
    logits = torch.randn(2, 3, 48, generator=torch.Generator().manual_seed(0)) * 2
    contexts = [[3, 7, 1], [12]]
    drafter = LatticeDrafter(lm, k=3, p=5, alpha=0.7)
    proposal = drafter.propose(logits, None, 0)
    drafts, sampled = drafter.finish(proposal, to_host(proposal.to_host), contexts, logits.device)
    assert sampled is None and drafts.shape == (2, 5, 3)
    logp = torch.log_softmax(logits, -1)
    for b, context in enumerate(contexts):
        top = logp[b].topk(3, dim=-1).indices
        totals = []
        for ranks in itertools.product(range(3), repeat=3):
            draft = [int(top[i, r]) for i, r in enumerate(ranks)]
            head_score = float(sum(logp[b, i, t] for i, t in enumerate(draft)))
            totals.append((head_score + 0.7 * lm.score(draft, context=context), draft))
        best = [d for _, d in sorted(totals, key=lambda x: -x[0])[:5]]
        assert drafts[b].tolist() == best
