"""The plug-in's bad arguments (issue 41, part 4): each is one clear ValueError, raised before the
model runs a single forward.

The list: every invalid draft setting, heads of another model (in memory and a heads folder),
heads on another dtype, an LM that is no NgramLM, an LM over another tokenizer, a prompt past the
position table, an empty batch, and the generate() modes the plug-in does not support.
"""

from __future__ import annotations

import math

import pytest
import torch

import draftlattice.hf as dlhf
from _hf_models import mismatched_parts
from draftlattice import NgramLM

V = 32


@pytest.fixture(scope="module")
def setup(tmp_path_factory, one_thread):
    d = tmp_path_factory.mktemp("hf-bad")
    model, other = mismatched_parts(d, V)
    return model, dlhf.DraftHeads.for_model(model, horizon=3), other, d


# (name, generate() keywords built from (model, heads, other model, folder), the phrase of the message)
CASES = [
    ("no heads", lambda m, h, o, d: {}, "draft_heads is required"),
    ("heads a path", lambda m, h, o, d: {"draft_heads": str(d / "other-heads")}, "draft_heads is required"),
    ("k = 0", lambda m, h, o, d: {"draft_heads": h, "draft_k": 0}, "draft_k"),
    ("k not an int", lambda m, h, o, d: {"draft_heads": h, "draft_k": 2.5}, "draft_k"),
    ("p = 0", lambda m, h, o, d: {"draft_heads": h, "draft_p": 0}, "draft_p"),
    ("nodes = 0", lambda m, h, o, d: {"draft_heads": h, "draft_nodes": 0}, "draft_nodes must be a positive int"),
    ("nodes not an int", lambda m, h, o, d: {"draft_heads": h, "draft_nodes": 8.0}, "draft_nodes"),
    ("nodes without heads", lambda m, h, o, d: {"draft_lookup": 2, "draft_nodes": 8}, "draft_nodes shapes the tree"),
    (
        "nodes with sampled drafts",
        lambda m, h, o, d: {"draft_heads": h, "do_sample": True, "draft_nodes": 8},
        "cannot draft for sample_rule 'multi'",
    ),
    ("alpha < 0", lambda m, h, o, d: {"draft_heads": h, "draft_alpha": -1.0}, "draft_alpha"),
    ("alpha nan", lambda m, h, o, d: {"draft_heads": h, "draft_alpha": math.nan}, "draft_alpha"),
    (
        "sample_alpha < 0",
        lambda m, h, o, d: {"draft_heads": h, "do_sample": True, "draft_sample_alpha": -0.5},
        "draft_sample_alpha",
    ),
    ("unknown layout", lambda m, h, o, d: {"draft_heads": h, "draft_verify": "chain"}, "draft_verify"),
    (
        "unknown sampling rule",
        lambda m, h, o, d: {"draft_heads": h, "do_sample": True, "draft_sample": "best"},
        "draft_sample",
    ),
    ("lookup < 0", lambda m, h, o, d: {"draft_heads": h, "draft_lookup": -1}, "draft_lookup"),
    (
        "lookup_tokens = 0",
        lambda m, h, o, d: {"draft_heads": h, "draft_lookup": 2, "draft_lookup_tokens": 0},
        "draft_lookup_tokens",
    ),
    (
        "lookup with one sampled draft",
        lambda m, h, o, d: {"draft_heads": h, "do_sample": True, "draft_lookup": 2, "draft_sample": "block"},
        "draft_lookup joins several drafts",
    ),
    (
        "heads of another model",
        lambda m, h, o, d: {"draft_heads": dlhf.DraftHeads.for_model(o, horizon=3)},
        "do not fit the model",
    ),
    (
        "heads in another dtype",
        lambda m, h, o, d: {"draft_heads": dlhf.DraftHeads.for_model(m, horizon=3).to(torch.bfloat16)},
        "heads.to(model.device, model.dtype)",
    ),
    ("LM a path", lambda m, h, o, d: {"draft_heads": h, "draft_lm": str(d / "foreign.arpa")}, "draft_lm must be"),
    (
        "LM over another tokenizer",
        lambda m, h, o, d: {"draft_heads": h, "draft_lm": NgramLM(d / "foreign.arpa")},
        "built over tokenizer sha256",
    ),
    ("beam search", lambda m, h, o, d: {"draft_heads": h, "num_beams": 2}, "beam search"),
    (
        "output_scores",
        lambda m, h, o, d: {"draft_heads": h, "output_scores": True, "return_dict_in_generate": True},
        "output_scores",
    ),
    (
        "two streamers",
        lambda m, h, o, d: {"draft_heads": h, "streamer": object(), "draft_streamer": object()},
        "either streamer",
    ),
]


@pytest.fixture()
def forwards(setup):
    """The model's forward calls during the test (none may run before an argument error)."""
    calls: list[int] = []
    handle = setup[0].base_model.register_forward_hook(lambda *args: calls.append(1))
    yield calls
    handle.remove()


@pytest.mark.parametrize(("name", "build", "phrase"), CASES, ids=[case[0] for case in CASES])
def test_each_bad_argument_is_one_error_before_any_forward(setup, forwards, name, build, phrase):
    model, heads, other, d = setup
    with pytest.raises(ValueError) as error:
        dlhf.generate(model, torch.tensor([[1, 2, 3, 4]]), max_new_tokens=4, pad_token_id=0, **build(*setup))
    assert phrase in str(error.value), f"{name}: {error.value}"
    assert "\n" not in str(error.value), f"{name}: not one line"
    assert forwards == [], f"{name}: the model ran before the error"


def test_a_heads_folder_for_another_model_is_refused(setup):
    model, _, _, d = setup
    with pytest.raises(ValueError, match="vocab_size 40 != the model's 32"):
        dlhf.DraftHeads.from_pretrained(d / "other-heads", model)


@pytest.mark.parametrize(
    ("ids", "phrase"),
    [
        (torch.zeros(0, 4, dtype=torch.long), "non-empty [batch, prompt]"),
        (torch.ones(1, 256, dtype=torch.long), "leaves no position to generate at"),  # the table: 256
        (torch.ones(2, 300, dtype=torch.long), "a prompt of 300 tokens"),
    ],
    ids=["empty batch", "prompt fills the table", "prompt past the table"],
)
def test_an_empty_batch_or_a_prompt_past_the_position_table(setup, forwards, ids, phrase):
    model, heads, _, _ = setup
    assert model.config.max_position_embeddings == 256
    with pytest.raises(ValueError) as error:
        model.generate(ids, max_new_tokens=4, pad_token_id=0, custom_generate=dlhf.generate, draft_heads=heads)
    assert phrase in str(error.value)
    assert forwards == []
