"""The one decoding engine: propose -> verify -> accept -> commit, batched and device-agnostic.

State between steps, per row: the cache holds every committed token except the last one, the
*root*, which is already decided (the target's greedy token, or its sampled one); and the draft
heads have read the hidden state that chose the root, so heads 2..h predict the ``g = h - 1``
tokens after it. One step is ONE forward of the base model:

1. propose: the drafter turns heads 2..h into drafts ``[B, p, g]`` (device half, then the host
   half after the step's one device->host transfer; see :mod:`.drafters.base`);
2. verify: one forward over the rows ``[root, d_1 .. d_g]`` (a token tree per sequence, or p
   chains) gives the target's processed scores after every draft prefix (:mod:`.forward`);
3. accept: a rule of :mod:`draftlattice.verify` (greedy chain or tree; block, token,
   multi-draft or tree sampling) picks the accepted path and the target's next token;
4. commit: the accepted tokens go to each row's stopper (EOS / length / criteria, token by
   token), the cache keeps the accepted path (:mod:`.cache`), the heads read the hidden state at
   the last accepted node for the next step's drafts (and, for heads that read the next token,
   the new root chosen there).

Rows accept different lengths: the cache keeps a common length with masked holes and explicit
positions, so each row's output equals decoding it alone. Greedy output equals the target's
greedy output; sampling output has exactly the target's law.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..verify import accept_chains, accept_tree, draw_categorical, verify_sampled
from ..verify.path import accept_tree_chains, chain_nodes
from ..verify.sampled import SAMPLE_RULES
from . import row_loop
from .arguments import check_inputs, check_no_filled_cache, check_parts, check_step
from .cache import cache_layers, compact, keep_block
from .drafters.base import Drafter, Sampling, to_host
from .forward import LAYOUTS, chain_forward, fill_padding, tree_forward
from .processors import needs_context
from .recording import StepObserver
from .stats import DecodeStats
from .stopping import RowStopper
from .target import Target, draft_head_logits, max_position

# Rows that accept fewer tokens than the batch's longest leave holes in the shared cache;
# compact it when the holes exceed this share of its length (rare: cost amortised).
COMPACT_HOLES = 0.5


@dataclass
class Engine:
    """Speculative decoding of a transformers causal LM with draft heads and a drafter.

    Attributes:
        model: a transformers ``*ForCausalLM`` (decoder-only).
        heads: the draft heads: ``heads.logits(hidden [..., d], model) -> [..., h-1, V]``
            (:class:`draftlattice.hf.DraftHeads`); heads whose ``reads_next_token`` is true
            are called ``heads.logits(hidden, model, next_ids)`` with the token each hidden
            state chose. None for a drafter that reads no heads (``reads_heads`` false: the
            context's copy alone, :class:`~.drafters.lookup.ContextLookup` ``(None)``).
        drafter: the :class:`~.drafters.base.Drafter` of heads 2..h.
        layout: verification layout, "tree" or "batch" (:mod:`.forward`); sampling rules read a
            tree as chains (one sampled draft is always a chain).
        sample_rule: None for greedy decoding, else a rule of
            :data:`draftlattice.verify.sampled.SAMPLE_RULES`.
        sampling: the warpers of the target's law (temperature, top-k, top-p), which sampled
            drafts also use; the processors below must apply the same warpers.
        processors: callable ``(input_ids, scores) -> scores`` applied to the target's scores
            at every position (transformers' ``LogitsProcessorList``), or None.
        observer: a :class:`~.recording.StepObserver` (report and trace recording), or None.
        streamer: a transformers-style streamer (``put``/``end``) fed with row 0's tokens.
        step: a lean target step built from ``model`` (:class:`draftlattice.lean.LeanLlama`:
            static KV cache, dense/int8/int4 weights) run instead of transformers' forward, or
            None. Its outputs are the step's own: in a quantized format, the quantized model's.
    """

    model: object
    heads: object
    drafter: Drafter
    layout: str = "tree"
    sample_rule: str | None = None
    sampling: Sampling | None = None
    processors: object = None
    observer: StepObserver | None = None
    streamer: object = None
    step: object = None
    _lm_head: object = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.sample_rule is not None and self.sample_rule not in SAMPLE_RULES:
            raise ValueError(f"sample_rule must be None (greedy) or one of {SAMPLE_RULES}, got {self.sample_rule!r}")
        if self.sample_rule is not None and self.sampling is None:
            self.sampling = Sampling()
        check_parts(self.model, self.heads, self.drafter, self.sample_rule, self.processors)
        name = getattr(self.drafter, "name", type(self.drafter).__name__)
        layouts = getattr(self.drafter, "layouts", LAYOUTS)
        if self.layout not in layouts:
            raise ValueError(f"the {name} drafter's drafts are verified as {' or '.join(layouts)}, not {self.layout!r}")
        if self.heads is None and self.observer is not None:
            raise ValueError("an observer records the heads' drafts: these steps run no heads")
        self._lm_head = self.model.get_output_embeddings()
        if self.step is not None:
            check_step(self.step, self.model)

    def head_logits(self, hidden: Tensor, next_ids: Tensor) -> Tensor:
        """Logits of heads 2..h ``[..., h-1, V]`` at ``hidden [..., d]``, where the target chose
        ``next_ids [...]`` (read only by heads that read the next token); None without heads."""
        if self.heads is None:
            return None
        if self.step is not None:
            return self.step.head_logits(self.heads, hidden, next_ids)
        return draft_head_logits(self.heads, self.model, hidden, next_ids)

    @property
    def draws(self) -> int:
        """Drafts sampled per row and step (0: deterministic drafts)."""
        return {None: 0, "tree": 0, "multi": self.drafter.p, "block": 1, "token": 1}[self.sample_rule]

    @torch.inference_mode()
    def run(
        self,
        input_ids: Tensor,
        stopper: RowStopper,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        cache=None,
        max_length: int = 0,
    ) -> tuple[list[list[int]], DecodeStats]:
        """Decode ``input_ids [B, P]`` (left padding allowed, with ``attention_mask``) until
        ``stopper`` finishes every row. Returns each row's new tokens and the run's statistics.

        ``cache``: a transformers ``DynamicCache`` to fill (default: a new one; with a lean
        ``step``, its own static cache, and a filled one is refused);
        ``max_length``: the longest sequence the run may produce (positions past the model's
        table are clamped for draft nodes that are never committed).

        Bad inputs (:func:`.arguments.check_inputs`) raise before any work.
        """
        check_inputs(self.model, input_ids, stopper, attention_mask, position_ids)
        if self.step is not None:
            check_no_filled_cache(cache)
            cache = self.step.new_cache(input_ids.shape[0], max(max_length, input_ids.shape[1]))  # the prompt included
        elif cache is None:
            from transformers import DynamicCache

            cache = DynamicCache()
        cache_layers(cache)  # refuse caches that cannot be rolled back, before any work
        device, dtype = self._lm_head.weight.device, self._lm_head.weight.dtype
        target = Target(
            self.model, cache, dtype, self.processors, max_position(self.model, max_length), self.heads, self.step
        )
        # A lean step on draftlattice's kernels runs the whole loop with PyTorch on one thread:
        # the engine's own small ops between steps would otherwise leave PyTorch's OpenMP threads
        # spinning on the cores the step's thread pool needs (steps 1.6x slower, bench/RESULTS.md).
        session = getattr(self.step, "session", contextlib.nullcontext)()
        with session:
            if row_loop.applies(self, input_ids, attention_mask, position_ids, stopper):
                return row_loop.decode(self, target, input_ids.to(device), stopper)
            return _Run(self, target, input_ids.to(device), attention_mask, position_ids, stopper).decode()


class _Run:
    """One :meth:`Engine.run`: the per-row state between steps."""

    def __init__(self, engine: Engine, target: Target, input_ids, attention_mask, position_ids, stopper) -> None:
        self.engine, self.target, self.stopper = engine, target, stopper
        self.input_ids = input_ids
        self.device = input_ids.device
        B, P = input_ids.shape
        self.attention_mask = attention_mask
        self.kv_valid = (
            torch.ones(B, P, dtype=torch.bool, device=self.device)
            if attention_mask is None
            else attention_mask.to(self.device).bool()
        )
        if position_ids is None:
            position_ids = (self.kv_valid.long().cumsum(-1) - 1).clamp(min=0)
        self.position_ids = position_ids.to(self.device)
        self.rows_host = input_ids.tolist()
        valid_host = self.kv_valid.tolist()
        self.contexts = [[t for t, ok in zip(row, ok_row) if ok] for row, ok_row in zip(self.rows_host, valid_host)]
        self.valid_count = [sum(ok_row) for ok_row in valid_host]  # valid cache slots per row
        self.new_tokens: list[list[int]] = [[] for _ in range(B)]
        self.stats = DecodeStats()
        self._needs_context = needs_context(engine.processors)  # else no committed ids go to the device

    def decode(self) -> tuple[list[list[int]], DecodeStats]:
        engine, stopper, observer = self.engine, self.stopper, self.engine.observer
        if engine.streamer is not None:
            engine.streamer.put(self.input_ids.cpu())
        root, proposal, draft_host = self._prefill()
        self.target.forward_seconds = 0.0  # the steps' forwards from here (stats.forward_seconds)
        positions = self.position_ids[:, -1].cpu() + 1  # root positions, on the host
        while not stopper.all_done:
            start = time.perf_counter()
            contexts = [self.contexts[b] + self.new_tokens[b] for b in range(len(self.contexts))]
            drafts, sampled = engine.drafter.finish(proposal, draft_host, contexts, self.device)
            self.stats.drafting_seconds += time.perf_counter() - start

            start = time.perf_counter()
            past = self.target.cache.get_seq_length()  # before the forward extends it
            forward, path = self._verify(root, drafts, sampled, positions)
            next_root = path.tokens.gather(1, path.num.unsqueeze(1)).squeeze(1)
            head_logits = self._heads_at(forward, path, next_root)
            propose_start = time.perf_counter()
            proposal = engine.drafter.propose(head_logits, engine.sampling, engine.draws)
            propose_seconds = time.perf_counter() - propose_start
            # The step's one device->host transfer: accepted lengths and tokens, and the next drafts.
            accepted_host, *draft_host = to_host(
                [torch.cat([path.num.unsqueeze(1), path.tokens], dim=1), *proposal.to_host]
            )
            num_host = accepted_host[:, 0].tolist()
            self._keep(path, num_host, past)
            self.stats.drafting_seconds += propose_seconds
            self.stats.verification_seconds += time.perf_counter() - start - propose_seconds
            self._commit(root, drafts, path, accepted_host, num_host, head_logits)
            positions = positions + accepted_host[:, 0] + 1
            root = next_root
        if observer is not None:
            for b, token in enumerate(root.tolist()):
                observer.finished(b, token)
        if engine.streamer is not None:
            engine.streamer.end()
        self.stats.new_tokens = sum(len(t) for t in self.new_tokens)
        self.stats.forward_seconds = self.target.forward_seconds
        return self.new_tokens, self.stats

    def _prefill(self):
        """The prompt's forward (the model's own masking), its first token and first drafts."""
        engine, stats = self.engine, self.stats
        start = time.perf_counter()
        hidden = self.target.hidden(self.input_ids, self.position_ids, self.attention_mask)[:, -1:]
        stats.target_calls += 1
        stats.prefill_calls += 1
        scores = self.target.logits(hidden[:, 0])
        if engine.processors:
            scores = engine.processors(self.input_ids, scores)
        root = draw_categorical(scores.softmax(-1)) if engine.sample_rule else scores.argmax(-1)
        head_logits = engine.head_logits(hidden[:, 0], root)
        proposal = engine.drafter.propose(head_logits, engine.sampling, engine.draws)
        first, *draft_host = to_host([root, *proposal.to_host])
        stats.prefill_seconds += time.perf_counter() - start
        for b, token in enumerate(first.tolist()):
            self.stopper.commit(b, [token], self.new_tokens, scores[b : b + 1])
        if engine.observer is not None:
            engine.observer.path(hidden, scores[:, None], [list(t) for t in self.new_tokens], self._draft_heads)
            engine.observer.drafted(head_logits)
        self._stream([0])
        return root, proposal, draft_host

    def _verify(self, root: Tensor, drafts: Tensor, sampled, positions: Tensor):
        """The step's forward and its accepted path; the forward also gives the draft heads'
        logits at every node (one output projection for the target and the heads)."""
        engine, target = self.engine, self.target
        sequences = (
            [
                torch.tensor(self.rows_host[b] + self.new_tokens[b]).to(self.device, non_blocking=True)
                for b in range(len(self.rows_host))
            ]
            if self._needs_context
            else []
        )
        if engine.sample_rule is None and engine.layout == "tree":
            forward = tree_forward(target, self.kv_valid, root, drafts, positions, sequences)
            path = accept_tree(forward.tree, forward.scores, forward.hidden)
        elif engine.layout == "tree" and (drafts.shape[1] > 1 or engine.sample_rule == "tree"):
            # Sampled drafts over their trie: p chains would repeat the cache p times and the
            # shared prefixes (the root at least) p times. The tree rule walks drafts that end
            # early (-1), so theirs stay as short as drafted: padding a best prefix out to the
            # longest draft cost forward nodes (8.9 a call against 4.0 for 3 prefixes).
            if engine.sample_rule != "tree":
                drafts = fill_padding(drafts)
            forward = tree_forward(target, self.kv_valid, root, drafts, positions, sequences)
            path = self._sampled_on_tree(forward, drafts, sampled)
        else:
            drafts = fill_padding(drafts)
            forward = chain_forward(target, self.kv_valid, root, drafts, positions, sequences)
            rule = () if engine.sample_rule is None else self._sampling_rule(forward, drafts, sampled)
            path = accept_chains(drafts, forward.scores, forward.hidden, *rule)
        self.stats.target_calls += 1
        self.stats.nodes += forward.hidden.shape[0] * forward.hidden.shape[1] // root.shape[0]
        return forward, path

    def _sampled_on_tree(self, forward, drafts: Tensor, sampled):
        """The sampling rule over drafts verified as their token tree, read as chains."""
        nodes = chain_nodes(forward.tree)  # [B, p, g+1]
        num, next_token, best = verify_sampled(
            self.engine.sample_rule, drafts, forward.scores.softmax(-1), None if sampled is None else sampled.q, nodes
        )
        return accept_tree_chains(forward.tree, drafts, forward.scores, forward.hidden, num, next_token, best)

    def _sampling_rule(self, forward, drafts: Tensor, sampled):
        B, p, g = drafts.shape
        probs = forward.scores.softmax(-1).view(B, p, g + 1, -1)
        return verify_sampled(
            self.engine.sample_rule, drafts.to(probs.device), probs, None if sampled is None else sampled.q
        )

    def _keep(self, path, num_host: list[int], past: int) -> None:
        """Roll the cache back to its ``past`` slots and each row's accepted path (holes where
        rows accepted less)."""
        keep = max(num_host) + 1
        keep_block(self.target.cache, past, path.cache_rows, path.slots[:, :keep])
        arange = torch.arange(keep, device=self.device)
        self.kv_valid = torch.cat([self.kv_valid, arange < (path.num + 1).unsqueeze(1)], dim=1)
        self.valid_count = [count + n + 1 for count, n in zip(self.valid_count, num_host)]
        if self.kv_valid.shape[1] - max(self.valid_count) > COMPACT_HOLES * self.kv_valid.shape[1]:
            self.kv_valid = compact(self.target.cache, self.kv_valid, max(self.valid_count))

    def _commit(self, root, drafts, path, accepted_host, num_host, head_logits) -> None:
        """Hand each running row's committed tokens to its stopper (and the observer)."""
        observer, stopper = self.engine.observer, self.stopper
        active = [b for b in range(len(num_host)) if not stopper.done[b]]
        before = [len(t) for t in self.new_tokens]
        roots = root.tolist() if observer is not None else None
        rescored = getattr(self.engine.drafter, "lm", None) is not None
        for b in active:
            committed = accepted_host[b, 1 : num_host[b] + 2].tolist()
            if observer is not None:
                observer.committed(b, roots[b], drafts[b], num_host[b], committed, rescored)
            stopper.commit(b, committed, self.new_tokens, path.scores[b])
        counts = [len(t) - n for t, n in zip(self.new_tokens, before)]
        # Draft tokens each row kept: a stop inside the block (EOS, length) drops the rest of it.
        self.stats.accepted.append([min(num_host[b], counts[b]) for b in active])
        if observer is not None:
            committed = [t[n:] for t, n in zip(self.new_tokens, before)]
            observer.path(path.hidden, path.scores, committed, self._draft_heads)
            observer.drafted(head_logits)
        self._stream(before)

    def _heads_at(self, forward, path, root: Tensor) -> Tensor:
        """Heads 2..h ``[B, h-1, V]`` at each row's last accepted node, where the target chose
        ``root`` (computed by the forward when it was small, see ``target.FUSED_HEADS_MAX_NODES``);
        None without heads."""
        if self.engine.heads is None:
            return None
        if forward.head_logits is not None:
            return forward.head_logits[path.last_node]
        return self.engine.head_logits(forward.hidden[path.last_node], root)

    def _draft_heads(self, hidden: Tensor, next_ids: Tensor) -> Tensor:
        """Float32 logits of heads 2..h ``[..., h-1, V]`` at ``hidden [..., d]``, which chose
        ``next_ids [...]``."""
        return self.engine.head_logits(hidden, next_ids).float()

    def _stream(self, before: list[int]) -> None:
        streamer = self.engine.streamer
        if streamer is not None and len(self.new_tokens[0]) > before[0]:
            streamer.put(torch.tensor(self.new_tokens[0][before[0] :]))
