"""The demo's work (``draftlattice demo``): the default model decodes a fixed prompt set once per
drafter, through transformers' own ``generate()``, and the rows are compared.

Greedy rows: ``generate`` (plain), ``prompt_lookup`` (transformers' prompt lookup), ``lookup`` (one
copied draft, no heads: from the context, else from the datastore of the model's answers), ``heads``
(the heads' 1-best draft), ``heads_tree`` (their p best drafts as a tree), ``ngram`` (the top-k
lattice rescored by the n-gram LM, 1-best), ``ngram_tree`` (its p best as a tree) and
``ngram_lookup_tree`` (that tree plus one draft copied from the context, prompt lookup's, else
the datastore's). With ``nodes``, the three trees are the lattice's ``nodes`` best prefixes
instead of its p best drafts (:mod:`draftlattice.node_tree`). Sampling rows (``temperature``): ``generate``, ``lean`` (plain sampling on
the lean step), ``lookup`` (the copy alone, tree rule), ``heads`` (one head draft, block
verification), ``heads_multi`` (p sampled head drafts, recursive rejection), ``ngram_multi`` (p
drafts from the full-support rescored lattice), ``ngram_tree`` (the p best drafts, tree rule) and
``ngram_lookup_tree`` (those and a copied draft from the context alone, tree rule).

Block efficiency is tokens per serial call of the target, counted at the model's trunk (the
prompt's forward included, so plain decoding is 1.0 and every row is counted alike). Prompts run
one after another and, within a prompt, every row in turn, so a slow phase of the machine hits
all rows alike; each row is warmed up first.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from ..decode.drafters.lattice import MAX_DRAFTS, MAX_NODES
from ..decode.drafters.lookup import LOOKUP_TOKENS
from .demo_prompts import DemoPrompt

logger = logging.getLogger(__name__)


@dataclass
class DemoSettings:
    """Drafter settings of the demo; ``temperature`` None is greedy decoding."""

    max_new_tokens: int = 64
    k: int = 8
    p: int = 4
    alpha: float = 0.5
    temperature: float | None = None
    top_p: float = 1.0
    #: LM weight of sampled lattice drafts, the plug-in's default too (bench/RESULTS.md, "sample_alpha")
    sample_alpha: float = 0.2
    prompt_lookup_tokens: int = 10
    lookup: int = 3  #: longest context n-gram the copied draft of ``ngram_lookup_tree`` matches
    lookup_tokens: int = LOOKUP_TOKENS  #: longest copied draft
    seed: int = 0
    copy_tokens: int | None = None  #: the lookup row's longest copied draft (None: lookup_tokens)
    #: the lookup row: the datastore's draft of up to this many tokens beside the copy (0: none)
    retrieval: int = 0
    #: the tree rows' trees as the lattice's ``nodes`` best prefixes (None: its p best drafts)
    nodes: int | None = None

    def __post_init__(self) -> None:
        names = ("max_new_tokens", "k", "p", "prompt_lookup_tokens", "lookup", "lookup_tokens")
        optional = tuple(name for name in ("copy_tokens", "nodes") if getattr(self, name) is not None)
        for name in names + optional:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        for name, most in (("p", MAX_DRAFTS), ("nodes", MAX_NODES)):
            if (getattr(self, name) or 0) > most:
                raise ValueError(f"{name} must be at most {most}, got {getattr(self, name)}")
        if isinstance(self.retrieval, bool) or not isinstance(self.retrieval, int) or self.retrieval < 0:
            raise ValueError(f"retrieval must be an int >= 0, got {self.retrieval!r}")
        for name in ("alpha", "sample_alpha"):
            if not 0 <= getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, got {getattr(self, name)}")
        if self.temperature is not None and not 0 < self.temperature < math.inf:
            raise ValueError(f"temperature must be a finite number > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def sampling(self) -> bool:
        return self.temperature is not None

    @property
    def tree(self) -> dict:
        """The tree rows' generate() keyword: their p best drafts or their best prefixes."""
        return {"draft_p": self.p} if self.nodes is None else {"draft_nodes": self.nodes}

    @property
    def tree_label(self) -> str:
        return f"p={self.p}" if self.nodes is None else f"nodes={self.nodes}"


@dataclass
class RowSpec:
    """One way of decoding: its name, how it is described, and its generate() keywords; or a
    ``runner`` of its own (``(prompt ids, max_new_tokens) -> (new ids, serial calls)``: the lean
    step's plain greedy decoding, llama.cpp's). ``reference`` names the row whose outputs it
    should agree with (plain greedy decoding of the same weights)."""

    name: str
    settings: str
    verifier: str
    kwargs: dict
    runner: Callable | None = None
    reference: str = "generate"


@dataclass
class Row:
    """A row's outputs and costs over all prompts."""

    spec: RowSpec
    outputs: list[list[int]] = field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0
    accepted: list[int] = field(default_factory=list)  #: draft tokens accepted per verification call
    identical: bool | None = None
    agreeing: int = 0  #: outputs equal to the generate row's

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def tokens(self) -> int:
        return sum(len(o) for o in self.outputs)

    @property
    def block_efficiency(self) -> float:
        return self.tokens / self.calls if self.calls else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


# Beyond this many candidates per head, each step's lattice work grows far past the paper's
# settings (k <= 16).
LARGE_K = 256


def check_candidates(k: int, p: int, vocab_size: int) -> None:
    """ValueError unless 1 <= k <= V and p >= 1; a logged warning when k is large (cost)."""
    if not 1 <= k <= vocab_size:
        raise ValueError(f"k={k} candidates per head: must be between 1 and the vocabulary size {vocab_size}")
    if p < 1:
        raise ValueError(f"p={p} drafts: must be at least 1")
    if k > LARGE_K:
        logger.warning(
            "k=%d candidates per head is far beyond the paper's k <= 16: each decoding step "
            "gets much slower (cost grows with k)",
            k,
        )


def row_specs(bundle, settings: DemoSettings, extra_rows=()) -> list[RowSpec]:
    """The demo's rows for greedy decoding or, with a temperature, for sampling; with a lean step
    (``bundle.step``) the drafted rows run it, and a ``lean`` row decodes with it plainly (their
    reference). ``extra_rows``: greedy reference rows of other decoders (llama.cpp's)."""
    import draftlattice.hf as dlhf

    st = settings
    draft = {"custom_generate": dlhf.generate, "draft_k": st.k, "return_dict_in_generate": True}
    h = bundle.heads.horizon
    copy = {"draft_lookup": st.lookup, "draft_lookup_tokens": st.lookup_tokens}
    copy_label = f"ngram_tree + a context copy (n<={st.lookup}, <={st.lookup_tokens} tokens)"
    store = getattr(bundle, "datastore", None)
    step = getattr(bundle, "step", None)
    if step is not None:
        draft["draft_step"] = step
    lookup_row = _copy_alone_row(st, {**draft, **copy, "draft_heads": None, "draft_datastore": store})
    if not st.sampling:
        heads = {**draft, "draft_heads": bundle.heads, "draft_lm": None}
        ngram = {**draft, "draft_heads": bundle.heads, "draft_lm": bundle.lm, "draft_alpha": st.alpha}
        drafted = [
            lookup_row,
            RowSpec("heads", f"h={h} argmax per head", "chain", {**heads, "draft_p": 1}),
            RowSpec("heads_tree", f"h={h} k={st.k} {st.tree_label}", "tree", {**heads, **st.tree}),
            RowSpec("ngram", f"h={h} k={st.k} alpha={st.alpha}", "chain", {**ngram, "draft_p": 1}),
            RowSpec("ngram_tree", f"h={h} k={st.k} {st.tree_label} alpha={st.alpha}", "tree", {**ngram, **st.tree}),
            # The datastore fills in where the context has no copy, as in the lookup row: +0.12
            # tokens a call at p = 1 on held-out prompts (bench/RESULTS.md, "Other sources").
            RowSpec(
                "ngram_lookup_tree",
                copy_label + ("" if store is None else ", else the datastore's"),
                "tree",
                {**ngram, **st.tree, **copy, "draft_datastore": store},
            ),
        ]
        plain = [
            RowSpec("generate", "plain greedy generate()", "-", {}),
            RowSpec(
                "prompt_lookup",
                f"prompt_lookup_num_tokens={st.prompt_lookup_tokens}",
                "chain",
                {"prompt_lookup_num_tokens": st.prompt_lookup_tokens},
            ),
        ]
        if step is not None:
            plain.append(
                RowSpec(
                    "lean",
                    f"plain greedy, {_step_label(step)}",
                    "-",
                    {},
                    runner=step_runner(step, bundle.model),
                )
            )
            drafted = [replace(spec, reference="lean") for spec in drafted]
        return plain + list(extra_rows) + drafted
    heads = {**draft, "draft_heads": bundle.sampling_heads, "draft_lm": None}
    ngram = {**draft, "draft_heads": bundle.sampling_heads, "draft_lm": bundle.lm}
    plain = [RowSpec("generate", "plain sampling generate()", "-", {})]
    if step is not None:  # plain sampling on the same step: what a drafted row must beat
        plain.append(RowSpec("lean", f"plain sampling, {_step_label(step)}", "-", {**draft, "draft_heads": None}))
    drafted = [
        replace(lookup_row, verifier="tree-sample", kwargs={**lookup_row.kwargs, "draft_sample": "tree"}),
        RowSpec("heads", f"h={h} one sampled draft", "block", {**heads, "draft_p": 1, "draft_sample": "block"}),
        RowSpec(
            "heads_multi",
            f"h={h} p={st.p} sampled drafts",
            "multi",
            {**heads, "draft_p": st.p, "draft_sample": "multi"},
        ),
        RowSpec(
            "ngram_multi",
            f"h={h} k={st.k} p={st.p} sample_alpha={st.sample_alpha}",
            "multi",
            {**ngram, "draft_p": st.p, "draft_sample": "multi", "draft_sample_alpha": st.sample_alpha},
        ),
        RowSpec(
            "ngram_tree",
            f"h={h} k={st.k} {st.tree_label} alpha={st.alpha}",
            "tree-sample",
            {**ngram, **st.tree, "draft_sample": "tree", "draft_alpha": st.alpha},
        ),
        RowSpec(
            "ngram_lookup_tree",
            copy_label,
            "tree-sample",
            {**ngram, **st.tree, "draft_sample": "tree", "draft_alpha": st.alpha, **copy},
        ),
    ]
    if step is not None:
        drafted = [replace(spec, reference="lean") for spec in drafted]
    return plain + list(extra_rows) + drafted


def _copy_alone_row(st: DemoSettings, kwargs: dict) -> RowSpec:
    """The ``lookup`` row (greedy; the tree rule when sampling): the copy alone, no heads, with
    ``kwargs`` (the datastore's among them) and the settings' copy length and retrieval branch."""
    store = kwargs["draft_datastore"]
    copy_tokens = st.copy_tokens or st.lookup_tokens
    retrieval = st.retrieval if store is not None else 0
    source = "a context copy" + ("" if store is None else ", else the datastore's")
    source += f" (+ the datastore's <= {retrieval} beside it)" if retrieval else ""
    kwargs = {**kwargs, "draft_lookup_tokens": copy_tokens, "draft_retrieval": retrieval}
    return RowSpec("lookup", f"{source} (n<={st.lookup}, <={copy_tokens} tokens)", "tree", kwargs)


def _step_label(step) -> str:
    return f"lean step, {step.weights} weights" + ("" if step.weights == "dense" else f" ({step.kernel})")


class TrunkCalls:
    """Counts serial calls of the model's trunk (``model.base_model``) inside a ``with`` block."""

    def __init__(self, model) -> None:
        self.model, self.count = model, 0

    def __enter__(self) -> TrunkCalls:
        self.handle = self.model.base_model.register_forward_pre_hook(self._hook)
        return self

    def _hook(self, module, args) -> None:
        self.count += 1

    def __exit__(self, *exc) -> None:
        self.handle.remove()


def decode_once(bundle, spec: RowSpec, prompt: DemoPrompt, settings: DemoSettings, max_new_tokens: int, seed: int):
    """``(new token ids, serial target calls, seconds, accepted per call)`` of one generate()
    call (or the row's own runner)."""
    model = bundle.model
    torch.manual_seed(seed)  # a runner that samples draws its seed from torch's generator
    if spec.runner is not None:
        start = time.perf_counter()
        tokens, calls = spec.runner(prompt.ids, max_new_tokens)
        return tokens, calls, time.perf_counter() - start, []
    ids = torch.tensor([prompt.ids], device=model.device)
    sampling = (
        {"do_sample": True, "temperature": settings.temperature, "top_p": settings.top_p, "top_k": 0}
        if settings.sampling
        else {"do_sample": False}
    )
    with TrunkCalls(model) as calls:
        start = time.perf_counter()
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, **sampling, **spec.kwargs
        )
        seconds = time.perf_counter() - start
    sequences = out.sequences if hasattr(out, "sequences") else out
    stats = getattr(out, "draft_stats", None)
    accepted = [a[0] for a in stats.accepted] if stats is not None else []
    count = stats.target_calls if stats is not None else calls.count  # a lean step calls no trunk
    return sequences[0, len(prompt.ids) :].tolist(), count, seconds, accepted


def step_runner(step, model) -> Callable:
    """Plain greedy decoding with the lean step (its weight format's own reference output),
    stopping at ``model``'s EOS like ``generate()``."""
    eos = model.generation_config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos

    def run(ids: list[int], max_new_tokens: int) -> tuple[list[int], int]:
        tokens = step.greedy(torch.tensor([ids], device=step.device), max_new_tokens, eos)
        return tokens, len(tokens)

    return run


def run_demo(
    bundle, prompts: list[DemoPrompt], settings: DemoSettings, progress: Callable | None = None, extra_rows=()
) -> list[Row]:
    """Every row over every prompt (see the module docstring); the first row is ``generate``."""
    rows = [Row(spec) for spec in row_specs(bundle, settings, extra_rows)]
    for row in rows:  # warm-up: first calls allocate and tune kernels
        decode_once(bundle, row.spec, prompts[0], settings, min(8, settings.max_new_tokens), settings.seed)
    items = progress(prompts, desc="demo") if progress else prompts
    with torch.inference_mode():
        for i, prompt in enumerate(items):
            for row in rows:
                tokens, calls, seconds, accepted = decode_once(
                    bundle, row.spec, prompt, settings, settings.max_new_tokens, settings.seed + i
                )
                row.outputs.append(tokens)
                row.calls += calls
                row.seconds += seconds
                row.accepted += accepted
    by_name = {row.name: row for row in rows}
    for row in rows[1:]:
        reference = by_name.get(row.spec.reference, rows[0]).outputs
        row.agreeing = sum(a == b for a, b in zip(row.outputs, reference))
        row.identical = None if settings.sampling else row.agreeing == len(reference)
    logger.info("demo: %s", ", ".join(f"{r.name} {r.block_efficiency:.2f}" for r in rows))
    return rows
