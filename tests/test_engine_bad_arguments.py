"""The engine's bad arguments (issue 41, part 4), called directly from Python: each is one clear
exception, raised before the model runs a single forward.

The list (:data:`CASES`): every invalid drafter setting (k, p, alpha, the LM, lookup, the neural
and oracle drafters), heads (horizon h, another model's, another dtype, none), the engine's own
settings (layout, sampling rule and warpers, processors, the model, a lean step or cache that does
not fit), and the inputs of a run (an empty batch, ids that are no token ids of the model, a
prompt past the position table, a mask or stopper of another shape, max_new_tokens <= 0).
ValueError for a bad value, TypeError for an object of the wrong kind; the checks are
``draftlattice.decode.arguments``'s, and the drafters' and heads' own. The same list through
``generate()`` is tests/test_hf_bad_arguments.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import draftlattice.hf as dlhf
from _hf_models import mismatched_parts
from draftlattice import NgramLM
from draftlattice.decode import (
    ContextLookup,
    Engine,
    LatticeDrafter,
    NeuralDrafter,
    OracleDrafter,
    RowStopper,
    Sampling,
)
from draftlattice.decode.target import cache_keyword

V = 32
PROMPT = torch.tensor([[1, 2, 3, 4]])


@dataclass
class Parts:
    model: object  #: a tiny Llama (V = 32, position table 256) saved with a tokenizer.json
    heads: object  #: its heads, h = 3
    other: object  #: a tiny Llama over V + 8 tokens
    folder: Path  #: holds other-heads/ (the other model's heads) and foreign.arpa (see mismatched_parts)
    filled_cache: object  #: a DynamicCache that already holds a prompt


@pytest.fixture(scope="module")
def parts(tmp_path_factory, one_thread):
    from transformers import DynamicCache

    d = tmp_path_factory.mktemp("engine-bad")
    model, other = mismatched_parts(d, V)
    cache = DynamicCache()
    with torch.inference_mode():
        model.base_model(PROMPT, use_cache=True, **{cache_keyword(model): cache})
    return Parts(model, dlhf.DraftHeads.for_model(model, horizon=3), other, d, cache)


def engine(s: Parts, drafter=None, heads=None, **settings) -> Engine:
    """An engine of the tiny model; by default its heads and the 2 best drafts of their top-3 lattice."""
    drafter = drafter if drafter is not None else LatticeDrafter(None, k=3, p=2)
    return Engine(s.model, heads if heads is not None else s.heads, drafter, **settings)


def run(s: Parts, ids=PROMPT, max_new_tokens=4, stopper=None, **inputs):
    """``engine.run`` of a default engine as generate() calls it."""
    stopper = stopper if stopper is not None else RowStopper(ids, max_new_tokens, set(), [], 0)
    return engine(s).run(ids, stopper, max_length=64, **inputs)


def lean_step(model):
    from draftlattice.lean import LeanLlama

    return LeanLlama(model, "dense")


# (name, exception, the phrase of its message, the call that must raise it)
CASES = [
    # the drafters' settings
    ("k = 0", ValueError, "k must be a positive int", lambda s: LatticeDrafter(None, k=0)),
    ("k not an int", ValueError, "k must be a positive int", lambda s: LatticeDrafter(None, k=2.5)),
    ("p beyond any tree", ValueError, "p must be at most 1024", lambda s: LatticeDrafter(None, p=1025)),
    ("nodes beyond any tree", ValueError, "nodes must be at most 4096", lambda s: LatticeDrafter(None, nodes=4097)),
    ("k a bool", ValueError, "k must be a positive int", lambda s: LatticeDrafter(None, k=True)),
    ("p = 0", ValueError, "p must be a positive int", lambda s: LatticeDrafter(None, p=0)),
    ("alpha < 0", ValueError, "alpha must be a finite number >= 0", lambda s: LatticeDrafter(None, alpha=-1.0)),
    ("alpha nan", ValueError, "alpha must be a finite number >= 0", lambda s: LatticeDrafter(None, alpha=math.nan)),
    ("alpha inf", ValueError, "alpha must be a finite number >= 0", lambda s: LatticeDrafter(None, alpha=math.inf)),
    ("sample_alpha < 0", ValueError, "sample_alpha must be", lambda s: LatticeDrafter(None, sample_alpha=-0.5)),
    ("LM a path", ValueError, "lm must be a draftlattice.NgramLM", lambda s: LatticeDrafter(str(s.folder / "x.arpa"))),
    (
        "LM over another tokenizer",
        ValueError,
        "built over tokenizer sha256",
        lambda s: engine(s, LatticeDrafter(NgramLM(s.folder / "foreign.arpa"))),
    ),
    ("lookup n-gram 0", ValueError, "max_ngram must be", lambda s: ContextLookup(LatticeDrafter(), max_ngram=0)),
    ("lookup length 0", ValueError, "length must be", lambda s: ContextLookup(LatticeDrafter(), length=0)),
    (
        "lookup with one sampled draft",
        ValueError,
        "lookup drafter cannot draft for sample_rule 'block'",
        lambda s: engine(s, ContextLookup(LatticeDrafter()), sample_rule="block"),
    ),
    ("neural k = 0", ValueError, "k must be a positive int", lambda s: NeuralDrafter(s.model, k=0)),
    ("neural window 0", ValueError, "window must be", lambda s: NeuralDrafter(s.model, window=0)),
    (
        "neural LM over another vocabulary",
        ValueError,
        "vocabulary (40) differs from the model's (32)",
        lambda s: engine(s, NeuralDrafter(s.other)),
    ),
    (
        "neural drafter sampling",
        ValueError,
        "no sampling mode",
        lambda s: engine(s, NeuralDrafter(s.model), sample_rule="tree"),
    ),
    ("oracle k = 0", ValueError, "k must be a positive int", lambda s: OracleDrafter([[1, 2]], k=0)),
    (
        "oracle drafter sampling",
        ValueError,
        "no sampling mode",
        lambda s: engine(s, OracleDrafter([[1, 2, 3, 4, 5]]), sample_rule="multi"),
    ),
    ("no drafter", TypeError, "drafter must be", lambda s: Engine(s.model, s.heads, None)),
    # the heads
    ("h = 1", ValueError, "horizon must be an int >= 2", lambda s: dlhf.DraftHeads.for_model(s.model, horizon=1)),
    ("h not an int", ValueError, "horizon must be an int", lambda s: dlhf.DraftHeads.for_model(s.model, horizon=2.0)),
    ("h past the heads", ValueError, "horizon must be an int in [2, 3]", lambda s: s.heads.truncated(4)),
    ("no heads", TypeError, "heads must be draft heads", lambda s: Engine(s.model, None, LatticeDrafter())),
    (
        "heads of another model",
        ValueError,
        "do not fit the model (hidden 32, vocab 32)",
        lambda s: engine(s, heads=dlhf.DraftHeads.for_model(s.other, horizon=3)),
    ),
    (
        "a heads folder for another model",
        ValueError,
        "vocab_size 40 != the model's 32",
        lambda s: dlhf.DraftHeads.from_pretrained(s.folder / "other-heads", s.model),
    ),
    (
        "heads in another dtype",
        ValueError,
        "heads.to(model.device, model.dtype)",
        lambda s: engine(s, heads=dlhf.DraftHeads.for_model(s.model, horizon=3).to(torch.bfloat16)),
    ),
    # the engine's settings
    ("unknown layout", ValueError, "layout must be one of", lambda s: engine(s, layout="chain")),
    ("unknown sampling rule", ValueError, "sample_rule must be None", lambda s: engine(s, sample_rule="best")),
    ("temperature 0", ValueError, "temperature must be a finite number > 0", lambda s: Sampling(temperature=0.0)),
    ("temperature nan", ValueError, "temperature must be", lambda s: Sampling(temperature=math.nan)),
    ("top_k < 0", ValueError, "top_k must be None or an int >= 0", lambda s: Sampling(top_k=-1)),
    ("top_p > 1", ValueError, "top_p must be None or a number in [0, 1]", lambda s: Sampling(top_p=1.5)),
    ("processors not callable", TypeError, "processors must be callable", lambda s: engine(s, processors=3)),
    ("a model with no LM head", TypeError, "transformers causal LM", lambda s: Engine(s.model.model, s.heads, None)),
    (
        "a lean step of another model",
        ValueError,
        "step was built for another model",
        lambda s: engine(s, step=lean_step(s.other)),
    ),
    (
        "a filled cache with a lean step",
        ValueError,
        "a lean step decodes into its own cache",
        lambda s: engine(s, step=lean_step(s.model)).run(
            PROMPT, RowStopper(PROMPT, 4, set(), [], 0), cache=s.filled_cache
        ),
    ),
    (
        "a cache that cannot be rolled back",
        ValueError,
        "unsupported cache layer",
        lambda s: run(s, cache=__import__("transformers").StaticCache(config=s.model.config, max_cache_len=16)),
    ),
    # the inputs of a run
    ("empty batch", ValueError, "non-empty [batch, prompt]", lambda s: run(s, torch.zeros(0, 4, dtype=torch.long))),
    ("empty prompt", ValueError, "non-empty [batch, prompt]", lambda s: run(s, torch.zeros(1, 0, dtype=torch.long))),
    ("ids of one dimension", ValueError, "non-empty [batch, prompt]", lambda s: run(s, torch.tensor([1, 2, 3]))),
    ("ids not integers", TypeError, "integer token ids", lambda s: run(s, torch.tensor([[1.0, 2.0]]))),
    ("an id past the vocabulary", ValueError, "token 35, outside", lambda s: run(s, torch.tensor([[1, 35]]))),
    ("a negative id", ValueError, "token -1, outside", lambda s: run(s, torch.tensor([[1, -1]]))),
    (
        "prompt fills the table",
        ValueError,
        "a prompt of 256 tokens leaves no position to generate at",
        lambda s: run(s, torch.ones(1, 256, dtype=torch.long)),
    ),
    (
        "prompt past the table",
        ValueError,
        "a prompt of 300 tokens",
        lambda s: run(s, torch.ones(2, 300, dtype=torch.long)),
    ),
    (
        "mask of another shape",
        ValueError,
        "attention_mask has shape [1, 3], input_ids [1, 4]",
        lambda s: run(s, attention_mask=torch.ones(1, 3, dtype=torch.long)),
    ),
    (
        "a row without a token",
        ValueError,
        "row 1 of attention_mask has no token",
        lambda s: run(s, torch.tensor([[1, 2], [0, 0]]), attention_mask=torch.tensor([[1, 1], [0, 0]])),
    ),
    (
        "positions of another shape",
        ValueError,
        "position_ids has shape [1, 2]",
        lambda s: run(s, position_ids=torch.tensor([[0, 1]])),
    ),
    (
        "stopper of another batch",
        ValueError,
        "the stopper was made for 2 rows, input_ids has 1",
        lambda s: run(s, stopper=RowStopper(torch.ones(2, 4, dtype=torch.long), 4, set(), [], 0)),
    ),
    ("max_new_tokens = 0", ValueError, "max_new_tokens must be an int >= 1", lambda s: run(s, max_new_tokens=0)),
    ("max_new_tokens < 0", ValueError, "max_new_tokens must be an int >= 1", lambda s: run(s, max_new_tokens=-3)),
    ("max_new_tokens 2.5", ValueError, "max_new_tokens must be an int >= 1", lambda s: run(s, max_new_tokens=2.5)),
    ("no stopping criterion", ValueError, "no stopping criterion", lambda s: run(s, max_new_tokens=math.inf)),
]


@pytest.fixture()
def forwards(parts):
    """The model's forward calls during the test (none may run before an argument error)."""
    calls: list[int] = []
    handle = parts.model.base_model.register_forward_hook(lambda *args: calls.append(1))
    yield calls
    handle.remove()


@pytest.mark.parametrize(("name", "kind", "phrase", "call"), CASES, ids=[case[0] for case in CASES])
def test_each_bad_argument_is_one_error_before_any_forward(parts, forwards, name, kind, phrase, call):
    with pytest.raises((ValueError, TypeError)) as error:
        call(parts)
    assert isinstance(error.value, kind), f"{name}: {type(error.value).__name__}: {error.value}"
    assert phrase in str(error.value), f"{name}: {error.value}"
    assert "\n" not in str(error.value), f"{name}: not one line"
    assert forwards == [], f"{name}: the model ran before the error"


def test_the_good_arguments_of_the_table_decode(parts):
    """The table's calls with the bad argument put right run (the errors come from the argument)."""
    tokens, stats = run(parts)
    assert len(tokens[0]) == 4 and stats.new_tokens == 4
    tokens, _ = run(parts, torch.tensor([[0, 1, 2], [3, 4, 5]]), attention_mask=torch.tensor([[0, 1, 1], [1, 1, 1]]))
    assert [len(t) for t in tokens] == [4, 4]
    assert len(Sampling(temperature=0.7, top_k=0, top_p=1.0).processors()) == 1  # top-k 0 and top-p 1: off


def test_an_oracle_that_does_not_fit_the_run_is_refused_while_decoding(parts):
    """The oracle's references can only be checked against what the run decodes: refused (one
    ValueError) at the first drafts, after the prefill."""
    with pytest.raises(ValueError, match="2 references for a batch of 1"):
        engine(parts, OracleDrafter([[1], [2]])).run(PROMPT, RowStopper(PROMPT, 5, set(), [], 0))
    with pytest.raises(ValueError, match="reference does not continue this context"):
        engine(parts, OracleDrafter([[1, 2, 3, 4, 5, 5, 5, 5]])).run(PROMPT, RowStopper(PROMPT, 5, set(), [], 0))
