"""The dense lean step at fixed shapes, so that a GPU runs each verification forward as one CUDA
graph.

Why: at the default model's size a GPU step is bound by launching kernels, not by running them
(~15 small kernels a layer, 30 layers; plain ``generate()`` and the plug-in both ran ~50 tokens/s
on an H200). A CUDA graph replays a whole forward from one launch, but it fixes shapes and
addresses. So here every verification forward pads its tree to a node budget (1, 4, 8, 16, 32
by default), writes its keys and values at slots given as a tensor, and attends to the cache's
whole fixed capacity under a mask that hides the unused slots; padding nodes attend only to
themselves, write past the real block, and their outputs are dropped. The cache never moves: one
buffer per batch size, made with the step and reused by every decoding call (so one
``GraphedStep`` decodes one call at a time).

On CUDA each (batch, budget) forward is captured on first use and replayed after. On other
devices the same fixed-shape forward runs eagerly: the CPU tests check the padding, masks and
slots that the graphs replay. Prompts, and forwards past the largest budget, run the plain step
unpadded.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .cache import StaticCache
from .model import LeanLlama

#: node budgets a verification forward is padded to (the demo's trees hold 2-32 nodes)
BUDGETS = (1, 4, 8, 16, 32)
#: the profiler's label of a fixed-shape forward (one graph replay on CUDA)
GRAPH_REGION = "draftlattice.graphed_forward"


class FixedCache(StaticCache):
    """A :class:`StaticCache` whose buffer never moves (a captured graph holds its address)."""

    def reserve(self, new_tokens: int) -> None:
        if self.length + new_tokens > self.capacity:
            raise ValueError(
                f"the graphed step's cache holds {self.capacity} slots: {self.length} used and "
                f"{new_tokens} new do not fit (make the GraphedStep with a larger capacity)"
            )

    def repeat_rows(self, repeats: int) -> None:
        raise ValueError(
            "the graphed step verifies token trees (draft_verify='tree'): the chain layout repeats "
            "cache rows, which a captured graph cannot follow"
        )


class _SlotWriter:
    """The cache as one fixed-shape forward sees it: keys/values written at ``slots`` (a tensor),
    every layer's whole capacity attended (the mask hides what is not in use)."""

    def __init__(self, cache: FixedCache, slots: Tensor) -> None:
        self.cache, self.slots = cache, slots
        self.length = cache.length  # read by the step only to refuse a 2D mask over a filled cache

    def reserve(self, new_tokens: int) -> None:
        pass

    def write(self, layer: int, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        self.cache.keys[layer].index_copy_(2, self.slots, keys)
        self.cache.values[layer].index_copy_(2, self.slots, values)
        return self.cache.keys[layer], self.cache.values[layer]

    def advance(self, new_tokens: int) -> None:
        pass


@dataclass
class _Forward:
    """One (batch, budget) forward's fixed inputs, and its graph once captured."""

    tokens: Tensor  #: [B, N] node tokens (padding keeps whatever the last step left: never read)
    positions: Tensor  #: [B, N]
    mask: Tensor  #: [B, 1, N, capacity] additive
    slots: Tensor  #: [N] cache slots written
    steps: Tensor  #: [N] 0..N-1, the slots' offsets from the used length
    graph: object = None  #: torch.cuda.CUDAGraph, or None (run eagerly)
    output: Tensor | None = None  #: the graph's output buffer [B, N, d]


class GraphedStep:
    """A dense :class:`LeanLlama` run at fixed shapes (see the module's docstring); everything but
    :meth:`hidden` and :meth:`new_cache` is the lean step's own.

    Args:
        lean: the step, with dense weights (int8/int4 run on draftlattice's CPU kernels, which a
            CUDA graph cannot hold).
        capacity: cache slots per row: prompt + new tokens + the largest budget must fit.
        budgets: node budgets, increasing.
    """

    def __init__(self, lean: LeanLlama, capacity: int = 1024, budgets: tuple[int, ...] = BUDGETS) -> None:
        if not isinstance(lean, LeanLlama) or lean.weights != "dense":
            raise ValueError(
                "GraphedStep runs a dense LeanLlama (LeanLlama(model, 'dense')): quantized formats run on draftlattice's CPU kernels"
            )
        budgets = tuple(budgets)
        if (
            not budgets
            or any(not isinstance(n, int) or n < 1 for n in budgets)
            or list(budgets) != sorted(set(budgets))
        ):
            raise ValueError(f"budgets must be increasing positive ints, got {budgets}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= budgets[-1]:
            raise ValueError(f"capacity must be an int above the largest budget {budgets[-1]}, got {capacity!r}")
        self.lean, self.capacity, self.budgets = lean, capacity, budgets
        self.graphs_on = lean.device.type == "cuda"
        self._caches: dict[int, FixedCache] = {}
        self._forwards: dict[tuple[int, int], _Forward] = {}
        self._pool = None
        self.replays = 0  #: forwards run at a budget (replayed on CUDA), for tests and benchmarks

    def __getattr__(self, name: str):
        if name == "lean":  # not yet set (during __init__, or unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.lean, name)

    def new_cache(self, batch: int, capacity: int = 0) -> FixedCache:
        """This batch size's cache, emptied (one buffer per batch size, kept for the graphs);
        ``capacity``: the slots the caller needs, refused beyond this step's own."""
        if capacity + self.budgets[-1] > self.capacity:
            raise ValueError(
                f"the graphed step's cache holds {self.capacity} slots per row: {capacity} needed plus "
                f"{self.budgets[-1]} for the largest budget do not fit (GraphedStep(..., capacity=))"
            )
        cache = self._caches.get(batch)
        if cache is None:
            lean = self.lean
            cache = FixedCache(
                len(lean.layers), batch, lean.kv_heads, lean.head_dim, self.capacity, lean.dtype, lean.device
            )
            self._caches[batch] = cache
        cache.length = 0
        return cache

    def hidden(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None, cache) -> Tensor:
        """As :meth:`LeanLlama.hidden`; a verification forward (a 4D mask over a filled
        :class:`FixedCache`) of at most the largest budget runs padded to its budget."""
        B, T = input_ids.shape
        budget = next((n for n in self.budgets if n >= T), None)
        fixed = isinstance(cache, FixedCache) and cache.length > 0
        if not fixed or budget is None or attention_mask is None or attention_mask.ndim != 4:
            return self.lean.hidden(input_ids, position_ids, attention_mask, cache)
        past = cache.length
        if past + budget > cache.capacity:
            raise ValueError(
                f"the graphed step's cache holds {cache.capacity} slots: {past} used and a {budget}-node "
                "forward do not fit (make the GraphedStep with a larger capacity)"
            )
        forward = self._forwards.get((B, budget))
        fresh = forward is None
        if fresh:
            forward = self._inputs(B, budget)
            self._forwards[(B, budget)] = forward
        self._fill(forward, input_ids, position_ids, attention_mask, past, T)
        if fresh and self.graphs_on:
            self._capture(forward, cache)
        if forward.graph is not None:
            forward.graph.replay()
            out = forward.output
        else:
            out = self._run(forward, cache)
        cache.length = past + T  # the real block; the padding's slots lie past it, unused
        self.replays += 1
        return out[:, :T].clone()  # the graph's buffer is overwritten by the next replay

    def _inputs(self, B: int, N: int) -> _Forward:
        lean, C = self.lean, self.capacity
        long = {"dtype": torch.int64, "device": lean.device}
        return _Forward(
            tokens=torch.zeros(B, N, **long),
            positions=torch.zeros(B, N, **long),
            mask=torch.full((B, 1, N, C), torch.finfo(lean.dtype).min, dtype=lean.dtype, device=lean.device),
            slots=torch.arange(N, **long),
            steps=torch.arange(N, **long),
        )

    def _fill(self, forward: _Forward, input_ids, position_ids, attention_mask, past: int, T: int) -> None:
        """This forward's tokens, positions, slots and mask into the fixed inputs: real nodes
        see what the engine's mask lets them; padding nodes see only their own slot."""
        N = forward.tokens.shape[1]
        forward.tokens[:, :T].copy_(input_ids)
        forward.positions[:, :T].copy_(position_ids)
        torch.add(forward.steps, past, out=forward.slots)
        mask = forward.mask
        mask.fill_(torch.finfo(mask.dtype).min)
        mask[:, :, :T, : past + T].copy_(attention_mask)
        if N > T:
            mask[:, 0, T:, past + T : past + N].diagonal(dim1=-2, dim2=-1).zero_()

    def _run(self, forward: _Forward, cache: FixedCache) -> Tensor:
        writer = _SlotWriter(cache, forward.slots)
        with torch.profiler.record_function(GRAPH_REGION):  # what a graph holds (bench/step_launches.py)
            return self.lean._hidden(forward.tokens, forward.positions, forward.mask, writer)

    def _capture(self, forward: _Forward, cache: FixedCache) -> None:
        """Capture this (batch, budget) forward as a CUDA graph. Its warm-up runs write the
        slots this forward is about to write anyway (past the cache's used length)."""
        side = torch.cuda.Stream(device=self.lean.device)
        side.wait_stream(torch.cuda.current_stream(self.lean.device))
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up: lazy initialisation (cuBLAS handles, attention kernels)
                self._run(forward, cache)
        torch.cuda.current_stream(self.lean.device).wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            forward.output = self._run(forward, cache)
        forward.graph = graph
