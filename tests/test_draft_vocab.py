"""Draft heads over part of the vocabulary (``DraftHeads.restrict_vocabulary``).

Their logits are the full projection's on the chosen tokens and -inf elsewhere; the set travels
with the heads (format version 2) and bad sets are refused; decoding drafts only from it and
greedy output still equals generate(), in both layouts and with an LM; sampling runs seeded.
"""

from __future__ import annotations

import json

import pytest
import torch

from _engine_models import PROMPTS, Recording, assert_seeded_sampling_repeats, run, trained
from _hf_models import greedy, left_padded, own_ngram
from draftlattice.decode import Engine, LatticeDrafter
from draftlattice.hf import DraftHeads

NEW_TOKENS = 24
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Next-token heads and plain heads (copies), each restricted to the 24 tokens the model
    emits most on the test prompts' greedy continuations, and an LM."""
    import copy

    model, heads = trained(next_token=True)
    _, plain = trained()
    out = greedy(model, *left_padded(PROMPTS), max_new_tokens=NEW_TOKENS)
    counts = torch.bincount(out.reshape(-1), minlength=model.config.vocab_size)
    vocab = counts.argsort(descending=True, stable=True)[:24]
    restricted = [copy.deepcopy(h).restrict_vocabulary(vocab) for h in (heads, plain)]
    lm = own_ngram(model, tmp_path_factory.mktemp("draft-vocab"), PROMPTS)
    return model, restricted, vocab.sort().values, lm


def test_logits_are_the_full_projection_on_the_set(setup):
    model, (heads, plain), vocab, _ = setup
    z, following = torch.randn(4, model.config.hidden_size), torch.tensor([1, 5, 9, 2])
    with torch.inference_mode():
        for h, args in ((heads, (following,)), (plain, ())):
            restricted = h.logits(z, model, *args)
            full = model.lm_head(h(z, h.next_embeds(model, following)))
            torch.testing.assert_close(restricted[..., vocab], full[..., vocab])
            outside = torch.ones(model.config.vocab_size, dtype=torch.bool)
            outside[vocab] = False
            assert bool(torch.isneginf(restricted[..., outside]).all())
            assert not h.fuses_with_target


def test_the_set_round_trips_and_bad_sets_are_refused(setup, tmp_path):
    model, (heads, plain), vocab, _ = setup
    for h, name in ((heads, "next"), (plain, "plain")):
        folder = h.save_pretrained(tmp_path / name)
        config = json.loads((folder / "config.json").read_text())
        assert config["version"] == 2 and config["draft_vocab_size"] == 24
        loaded = DraftHeads.from_pretrained(folder, model)
        assert loaded.draft_vocab.tolist() == vocab.tolist()
        assert loaded.truncated(2).draft_vocab.tolist() == vocab.tolist()
    V = model.config.vocab_size
    for ids, message in (
        ([], "non-empty 1-D"),
        ([[1, 2]], "non-empty 1-D"),
        ([1.0, 2.0], "non-empty 1-D"),
        ([3, 3], "distinct"),
        ([0, V], f"in \\[0, {V}\\)"),
        ([-1, 2], f"in \\[0, {V}\\)"),
    ):
        with pytest.raises(ValueError, match=message):
            DraftHeads.for_model(model, 3).restrict_vocabulary(torch.tensor(ids))
    # A file whose set is out of range is refused with the file named.
    from safetensors.torch import load_file, save_file

    state = load_file(str(tmp_path / "plain" / "model.safetensors"))
    state["draft_vocab"] = torch.full_like(state["draft_vocab"], V + 5)
    save_file(state, str(tmp_path / "plain" / "model.safetensors"))
    with pytest.raises(ValueError, match="model.safetensors: draft vocabulary ids must be in"):
        DraftHeads.from_pretrained(tmp_path / "plain", model)
    assert DraftHeads.for_model(model, 3).restrict_vocabulary(None).draft_vocab is None


@pytest.mark.parametrize("layout", ["tree", "batch"])
@pytest.mark.parametrize("which", [0, 1])
def test_greedy_output_equals_generate_and_drafts_stay_in_the_set(setup, layout, which):
    model, both, vocab, lm = setup
    heads = both[which]
    ids, mask = left_padded([PROMPTS[0], PROMPTS[1], PROMPTS[3]])
    expected = greedy(model, ids, mask, max_new_tokens=NEW_TOKENS)
    drafter = Recording(LatticeDrafter(lm, k=3, p=3, alpha=1.0))
    _, stats, out = run(Engine(model, heads, drafter, layout=layout), ids, NEW_TOKENS, mask)
    assert out.tolist() == expected.tolist()
    assert sum(map(sum, stats.accepted)) > 0
    allowed = set(vocab.tolist())
    for head_logits in drafter.heads:
        top = head_logits.topk(3, dim=-1).indices
        assert set(top.reshape(-1).tolist()) <= allowed


def test_seeded_sampling_runs_with_a_draft_vocabulary(setup):
    model, (heads, _), _, lm = setup
    assert_seeded_sampling_repeats(model, heads, lm, "multi", temperature=0.9, seed=11)


def test_a_trace_of_heads_over_a_draft_vocabulary_has_finite_entropies(setup):
    """Tokens outside the set have probability 0 (logits -inf): they add nothing to a head's
    entropy (a trace with NaN entropies would be refused by trace record)."""
    import numpy as np

    from draftlattice.evaluate.record import record_trace

    model, restricted, vocab, _ = setup
    trace = record_trace(model, restricted[0], [PROMPTS[0]], 12, top_k=4, progress=False)
    entropy, ids = trace.entropy[0], trace.topk_ids[0]
    assert np.isfinite(entropy).all() and (entropy[:, 1:] <= np.log(len(vocab)) + 1e-4).all()
    assert np.isin(ids[:, 1:], vocab.numpy()).all()  # heads 2..h draft from the set only
