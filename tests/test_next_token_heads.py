"""Heads that read the next token: ``DraftHeads.for_model(..., next_token=True)``.

Such a head reads the input embedding of token t + 1 (the target's own choice at t, known when
heads 2..h draft) beside the hidden state at t. Checked here: the file format (version 2, refused
where it does not fit the model), the error without the token, training (they learn more than
plain heads on the same steps), greedy decoding equal to generate() in both layouts, with and
without an LM, in left-padded batches; every step's heads read the root the target chose there (a
fresh forward with that token gives the same logits); traces record them at every committed
position; seeded sampling runs through them.
"""

from __future__ import annotations

import json

import pytest
import torch

from _engine_models import PROMPTS, Recording, assert_seeded_sampling_repeats, run, trained, unpadded
from _hf_models import greedy, left_padded, llama, own_ngram
from draftlattice.decode import Engine, LatticeDrafter
from draftlattice.evaluate.record import record_prompt
from draftlattice.hf import DraftHeads

NEW_TOKENS = 24
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    model, heads = trained(next_token=True)
    return model, heads, own_ngram(model, tmp_path_factory.mktemp("next-token"), PROMPTS)


def fresh_heads(model, heads, context: list[int]) -> torch.Tensor:
    """Heads 2..h at the state that chose ``context[-1]``, from a fresh forward, reading it."""
    with torch.inference_mode():
        hidden = model.base_model(input_ids=torch.tensor([context[:-1]])).last_hidden_state[0, -1]
        return heads.logits(hidden, model, torch.tensor(context[-1]))


def test_the_format_round_trips_as_version_2(setup, tmp_path):
    model, heads, _ = setup
    heads.save_pretrained(tmp_path / "next")
    config = json.loads((tmp_path / "next" / "config.json").read_text())
    assert config["version"] == 2 and config["next_token_width"] == model.config.hidden_size
    loaded = DraftHeads.from_pretrained(tmp_path / "next", model)
    assert loaded.reads_next_token and loaded.truncated(2).reads_next_token
    z, following = torch.randn(5, model.config.hidden_size), torch.tensor([1, 2, 3, 4, 5])
    with torch.inference_mode():
        torch.testing.assert_close(loaded.logits(z, model, following), heads.logits(z, model, following))
        # The token matters: another one gives other drafts.
        assert not torch.allclose(heads.logits(z, model, following), heads.logits(z, model, following.flip(0)))
    plain = DraftHeads.for_model(model, horizon=3)
    plain.save_pretrained(tmp_path / "plain")
    config = json.loads((tmp_path / "plain" / "config.json").read_text())
    assert config["version"] == 1 and "next_token_width" not in config  # old readers still read plain heads
    assert not DraftHeads.from_pretrained(tmp_path / "plain", model).reads_next_token


def test_refusals_name_the_problem(setup, tmp_path):
    model, heads, _ = setup
    with pytest.raises(ValueError, match="pass next_ids"):
        heads.logits(torch.randn(2, model.config.hidden_size), model)
    folder = heads.save_pretrained(tmp_path / "h")
    config = json.loads((folder / "config.json").read_text())
    for width, message in (
        (0, "next_token_width must be a positive int"),
        ("8", "next_token_width must be a positive int"),
        (7, "next_token_width 7 != the model's"),
        (None, "tensors do not match config.json"),  # plain heads' config over next-token weights
    ):
        (folder / "config.json").write_text(json.dumps({**config, "next_token_width": width}))
        with pytest.raises(ValueError, match=message):
            DraftHeads.from_pretrained(folder, model)


def test_they_learn_more_than_plain_heads_on_the_same_steps(setup):
    """Same tiny model, data, seed and steps: the final training loss is lower when the heads
    read the next token (a small head cannot compute the target's argmax from z alone)."""
    from draftlattice.training import train_heads

    model = llama(seed=3)
    corpus = torch.randint(0, model.config.vocab_size, (64 * 32,), generator=torch.Generator().manual_seed(3))
    settings = dict(steps=80, batch_size=8, seq_len=32, targets="greedy", prompt_len=4, lr=1e-2, log_every=10_000)
    losses = {}
    for next_token in (False, True):
        result = train_heads(model, corpus, horizon=3, seed=3, next_token=next_token, progress=False, **settings)
        assert result.heads.reads_next_token == next_token
        losses[next_token] = sum(result.losses[-10:]) / 10
    assert losses[True] < 0.95 * losses[False], losses  # measured: 0.896 vs 0.982


@pytest.mark.parametrize("layout", ["tree", "batch"])
@pytest.mark.parametrize("with_lm", [False, True])
def test_greedy_output_equals_generate_in_padded_batches(setup, layout, with_lm):
    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[0], PROMPTS[1], PROMPTS[3]])
    expected = greedy(model, ids, mask, max_new_tokens=NEW_TOKENS)
    drafter = LatticeDrafter(lm if with_lm else None, k=3, p=3, alpha=1.0)
    _, stats, out = run(Engine(model, heads, drafter, layout=layout), ids, NEW_TOKENS, mask)
    assert out.tolist() == expected.tolist()
    assert max(max(step) for step in stats.accepted) >= 2  # multi-token acceptance happened


@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_every_step_reads_the_root_the_target_chose(setup, layout):
    """The heads' logits handed to the drafter equal the heads at a fresh forward over the
    committed tokens, reading the step's root (the last token of each row's context)."""
    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[1], PROMPTS[2], PROMPTS[4]])
    prompts = unpadded(ids, mask)
    drafter = Recording(LatticeDrafter(lm, k=3, p=2, alpha=1.0))
    _, stats, _ = run(Engine(model, heads, drafter, layout=layout), ids, NEW_TOKENS, mask)
    checked = 0
    for head_logits, contexts in zip(drafter.heads, drafter.contexts):
        for b, context in enumerate(contexts):
            if len(context) - len(prompts[b]) >= NEW_TOKENS:
                continue  # the row has finished
            torch.testing.assert_close(head_logits[b], fresh_heads(model, heads, context), rtol=1e-4, atol=1e-4)
            checked += 1
    assert checked >= 3 * 4 and stats.steps >= 4


def test_a_trace_records_them_at_every_committed_position(setup):
    model, heads, _ = setup
    prompt = PROMPTS[3]
    tokens, ids, logprobs, _ = record_prompt(model, heads, prompt, 12, top_k=4)
    context = list(prompt)
    for t, token in enumerate(tokens.tolist()):
        context.append(token)
        top = fresh_heads(model, heads, context).float().log_softmax(-1).topk(4, dim=-1)
        assert ids[t, 1:].tolist() == top.indices.tolist()
        torch.testing.assert_close(torch.from_numpy(logprobs[t, 1:]), top.values, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rule", ["multi", "block", "tree"])
def test_seeded_sampling_runs_through_them(setup, rule):
    """Sampling with heads that read the sampled root: seeded runs repeat, lengths are right."""
    model, heads, lm = setup
    assert_seeded_sampling_repeats(model, heads, lm, rule, temperature=0.8, seed=5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="not applicable: CUDA is not available")
@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_greedy_output_equals_generate_on_cuda(setup, layout):
    import copy

    model, heads, lm = setup
    model, heads = copy.deepcopy(model).to("cuda"), copy.deepcopy(heads).to("cuda")
    ids, mask = (t.to("cuda") for t in left_padded([PROMPTS[0], PROMPTS[3]]))
    expected = greedy(model, ids, mask, max_new_tokens=NEW_TOKENS)
    _, _, out = run(Engine(model, heads, LatticeDrafter(lm, k=3, p=3), layout=layout), ids, NEW_TOKENS, mask)
    assert out.tolist() == expected.tolist()
