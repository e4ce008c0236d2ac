"""Greedy blockwise decoding equals plain greedy decoding of the target, for every drafter."""

from __future__ import annotations

import pytest
import torch

from _decode_models import VOCAB, markov_ngram, ngram_dir, prompts, trained_model  # noqa: F401
from draftlattice.decode import (
    BlockwiseDecoder,
    Drafts,
    LatticeDrafter,
    NeuralDrafter,
    OracleDrafter,
    SamplingConfig,
    VanillaDrafter,
    greedy_decode,
)
from draftlattice.model import BlockwiseConfig, BlockwiseLM

NEW_TOKENS = 24
pytestmark = pytest.mark.usefixtures("one_thread")


def drafters(model, reference, lm):
    yield VanillaDrafter()
    yield LatticeDrafter(lm, k=2, p=1, alpha=0.5)
    yield LatticeDrafter(lm, k=3, p=4, alpha=1.0)
    yield LatticeDrafter(lm, k=4, p=2, alpha=0.0, bos=False)
    yield NeuralDrafter(trained_model(2, seed=1), k=3, alpha=1.0)
    yield NeuralDrafter(trained_model(2, seed=1), k=2, alpha=5.0)
    yield OracleDrafter(reference, k=3)


@pytest.mark.parametrize("h", [2, 4])
@pytest.mark.parametrize("verifier", ["greedy", "tree"])
def test_every_drafter_reproduces_greedy_decoding(h, verifier, ngram_dir):
    model = trained_model(h)
    lm = markov_ngram(ngram_dir, order=3)
    sizes = torch.zeros(h + 1, dtype=torch.int64)
    for prompt in prompts(3, seed=h):
        expected = greedy_decode(model, prompt, NEW_TOKENS)
        for drafter in drafters(model, prompt + expected, lm):
            result = BlockwiseDecoder(model, drafter, verifier).generate(prompt, NEW_TOKENS)
            assert result.tokens == expected, (drafter.name, prompt)
            stats = result.stats
            assert stats.new_tokens == NEW_TOKENS
            assert sum(n * c for n, c in enumerate(stats.block_sizes)) + 1 >= NEW_TOKENS
            assert stats.serial_calls == stats.steps + 1 == sum(stats.block_sizes) + 1
            sizes[: len(stats.block_sizes)] += torch.tensor(stats.block_sizes)
    # The models are trained so that both full acceptance and rejection occur.
    assert sizes[h] > 0 and sizes[1:h].sum() > 0, sizes.tolist()


def test_plain_greedy_with_cache_matches_recomputation():
    model = trained_model(4)
    for prompt in prompts(3, seed=7):
        assert greedy_decode(model, prompt, 20) == greedy_decode(model, prompt, 20, use_cache=False)


class RecordingDrafter:
    """Vanilla drafts with several rows (ranked by p-th best per head) and a log of its inputs."""

    name = "recording"

    def __init__(self, p: int) -> None:
        self.num_drafts = p
        self.calls: list[tuple[torch.Tensor, list[int]]] = []

    def propose(self, head_logits, context):
        self.calls.append((head_logits.clone(), list(context)))
        top = head_logits.topk(self.num_drafts, -1).indices  # [g, p]
        rows = top.T.clone()
        rows[1:, 0] = rows[0, 0]  # rows share a first token, so the tree really merges prefixes
        return Drafts(torch.unique(rows, dim=0, sorted=False)[: self.num_drafts])


@pytest.mark.parametrize("verifier", ["greedy", "tree"])
@pytest.mark.parametrize("p", [1, 3])
def test_kv_cache_is_rolled_back_to_the_committed_tokens(verifier, p):
    """Each step's head logits (computed from the rolled-back cache) equal a fresh forward."""
    model = trained_model(4)
    prompt = prompts(1, seed=3)[0]
    drafter = RecordingDrafter(p)
    result = BlockwiseDecoder(model, drafter, verifier).generate(prompt, 30)
    assert result.tokens == greedy_decode(model, prompt, 30)
    assert len(drafter.calls) >= 5
    for head_logits, context in drafter.calls:
        # context ends with the pending token; the heads come from the position before it.
        with torch.inference_mode():
            fresh = model(torch.tensor([context[:-1]])).logits[0, -1, 1 : 1 + head_logits.shape[0]]
        torch.testing.assert_close(head_logits, fresh, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("verifier", ["greedy", "tree"])
def test_several_drafts_match_and_never_accept_less_than_the_first(verifier):
    model = trained_model(4)
    prompt = prompts(1, seed=5)[0]
    expected = greedy_decode(model, prompt, 30)
    one = BlockwiseDecoder(model, RecordingDrafter(1), verifier).generate(prompt, 30)
    three = BlockwiseDecoder(model, RecordingDrafter(3), verifier).generate(prompt, 30)
    assert one.tokens == three.tokens == expected
    assert three.stats.serial_calls <= one.stats.serial_calls


def test_eos_stops_generation_and_is_included():
    model = trained_model(4)
    prompt = prompts(1, seed=2)[0]
    expected = greedy_decode(model, prompt, 30)
    eos = expected[10]
    cut = expected[: expected.index(eos) + 1]
    assert greedy_decode(model, prompt, 30, eos_token_id=eos) == cut
    for verifier in ("greedy", "tree"):
        result = BlockwiseDecoder(model, VanillaDrafter(), verifier).generate(prompt, 30, eos_token_id=eos)
        assert result.tokens == cut
        assert result.stats.new_tokens == len(cut)


@pytest.mark.parametrize("max_new", [1, 2, 3, 5])
def test_short_generations(max_new):
    model = trained_model(4)
    prompt = prompts(1, seed=4)[0]
    result = BlockwiseDecoder(model, VanillaDrafter()).generate(prompt, max_new)
    assert result.tokens == greedy_decode(model, prompt, max_new)
    assert result.stats.serial_calls <= max_new


def test_bad_arguments_raise_clear_errors():
    model = trained_model(2)
    with pytest.raises(ValueError, match="verifier"):
        BlockwiseDecoder(model, VanillaDrafter(), "beam")
    with pytest.raises(ValueError, match="greedily"):
        BlockwiseDecoder(model, VanillaDrafter(), "tree", SamplingConfig())
    decoder = BlockwiseDecoder(model, VanillaDrafter())
    with pytest.raises(ValueError, match="out of range"):
        decoder.generate([VOCAB], 3)
    with pytest.raises(ValueError, match="non-empty"):
        decoder.generate([], 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        decoder.generate([1], 0)
    with pytest.raises(ValueError, match="max_seq_len"):
        decoder.generate([1] * 100, 100)
    with pytest.raises(ValueError, match="reference"):
        BlockwiseDecoder(model, OracleDrafter([5, 5, 5])).generate([1, 2], 4)
    with pytest.raises(ValueError, match="temperature"):
        SamplingConfig(temperature=0)


class BadDrafter(VanillaDrafter):
    def propose(self, head_logits, context):
        return Drafts(torch.zeros(1, head_logits.shape[0] + 1, dtype=torch.int64))


def test_a_drafter_returning_the_wrong_shape_is_reported():
    with pytest.raises(ValueError, match="expected"):
        BlockwiseDecoder(trained_model(2), BadDrafter()).generate([1, 2], 5)


def test_lattice_drafts_are_the_exact_p_best_of_the_rescored_lattice(ngram_dir):
    """p-best drafts by brute force over all k**g drafts, scored with the LM's own scorer."""
    import itertools

    lm = markov_ngram(ngram_dir, order=3)
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(0)) * 2
    context = [3, 7, 1]
    drafter = LatticeDrafter(lm, k=3, p=5, alpha=0.7, bos=True)
    lattice = drafter.lattice(logits)
    logp = torch.log_softmax(logits, -1)
    totals = []
    for ranks in itertools.product(range(3), repeat=3):
        draft = [int(lattice.tokens[i, r]) for i, r in enumerate(ranks)]
        lm_score = lm.score(draft, context=context, bos=True)
        totals.append((float(sum(logp[i, t] for i, t in enumerate(draft))) + 0.7 * lm_score, draft))
    best = [d for _, d in sorted(totals, key=lambda x: -x[0])[:5]]
    assert drafter.propose(logits, context).tokens.tolist() == best


def test_lattice_drafter_rejects_bad_settings(ngram_dir):
    lm = markov_ngram(ngram_dir, order=3)
    for kwargs in ({"k": 0}, {"p": 0}, {"alpha": -1.0}):
        with pytest.raises(ValueError):
            LatticeDrafter(lm, **kwargs)


def test_heads_are_evaluated_lazily_but_exactly():
    """The decoder's fast path (head 1 everywhere, all heads at one position) equals forward()."""
    from draftlattice.decode.loop import _StepOutput

    model = trained_model(4)
    ids = torch.tensor([prompts(1, seed=9)[0]])
    with torch.inference_mode():
        full = model(ids).logits
        out = _StepOutput(model, ids, None)
        torch.testing.assert_close(out.head1(), full[:, :, 0])
        torch.testing.assert_close(out.heads(0, 3), full[0, 3])


def algorithm2_reference(lm, head_logits, context, k, alpha):
    """Kim et al. 2024, Algorithm 2, recomputing the LM on the whole sequence at every position."""
    head_lp = torch.log_softmax(head_logits, -1)
    chosen = []
    for i in range(head_logits.shape[0]):
        with torch.inference_mode():
            lm_lp = torch.log_softmax(lm(torch.tensor([list(context) + chosen])).logits[0, -1, 0], -1)
        cand_lp, cand = head_lp[i].topk(k)
        chosen.append(int(cand[(cand_lp + alpha * lm_lp[cand]).argmax()]))
    return chosen


class CheckedNeural:
    """Runs the (cache-reusing) NeuralDrafter and checks every proposal against Algorithm 2."""

    name, num_drafts = "checked-neural", 1

    def __init__(self, lm, k, alpha) -> None:
        self.inner, self.lm, self.k, self.alpha, self.calls = NeuralDrafter(lm, k=k, alpha=alpha), lm, k, alpha, 0

    def propose(self, head_logits, context):
        drafts = self.inner.propose(head_logits, context)
        assert drafts.tokens[0].tolist() == algorithm2_reference(self.lm, head_logits, context, self.k, self.alpha)
        self.calls += 1
        return drafts


def test_neural_rescoring_is_algorithm_2_exactly():
    model, lm = trained_model(4), trained_model(2, seed=1)
    drafter = CheckedNeural(lm, k=3, alpha=2.0)
    for prompt in prompts(2, seed=8):
        result = BlockwiseDecoder(model, drafter, "greedy").generate(prompt, 20)
        assert result.tokens == greedy_decode(model, prompt, 20)
    assert drafter.calls >= 8


def test_neural_rescorer_restarts_on_a_window_past_its_positions():
    model = trained_model(4)
    small = BlockwiseLM(
        BlockwiseConfig(
            vocab_size=VOCAB, n_layer=1, n_head=2, d_model=16, d_ff=32, num_heads=1, max_seq_len=12, head_hidden=16
        )
    )
    prompt = prompts(1, seed=9, length=10)[0]
    drafter = NeuralDrafter(small, k=3, alpha=1.0, window=5)
    assert BlockwiseDecoder(model, drafter).generate(prompt, 20).tokens == greedy_decode(model, prompt, 20)
    with pytest.raises(ValueError, match="window"):
        NeuralDrafter(small, window=12)
