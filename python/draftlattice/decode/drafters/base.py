"""What every drafter provides: drafts of the next block from the heads' logits, in two halves.

The engine needs one device->host transfer per step. So drafting is split: :meth:`Drafter.propose`
runs on the device right after verification and names the small tensors the host needs
(``Proposal.to_host``: the p best paths, or a top-k lattice); the engine copies them to the host
together with the step's accepted lengths; :meth:`Drafter.finish` then completes the drafts on the
host (LM rescoring, sampling of the rescored lattice, the oracle) with each row's context.

Head 1's logits are not passed: its token is the target's own (greedy argmax or the verifier's
draw), decided before drafting and already at the end of each context. ``head_logits[:, i]`` is
head i+2's output, predicting draft position i.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from ... import _core


@dataclass(frozen=True)
class Sampling:
    """generate()'s sampling warpers, which the heads' proposal law also uses."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        # As transformers' warpers refuse them; 0 and None turn top-k off, None top-p.
        t, k, p = self.temperature, self.top_k, self.top_p
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not 0 < t < math.inf:
            raise ValueError(f"temperature must be a finite number > 0, got {t!r}")
        if k is not None and (isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0):
            raise ValueError(f"top_k must be None or an int >= 0, got {k!r}")
        if p is not None and (isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p <= 1):
            raise ValueError(f"top_p must be None or a number in [0, 1], got {p!r}")

    def processors(self):
        """transformers' logits warpers of these settings, in generate()'s order (temperature,
        top-k, top-p): the target's law for the engine's ``processors=``, the same law
        :func:`draftlattice.verify.sampling_distribution` computes for the drafts."""
        from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        warpers = LogitsProcessorList()
        if self.temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(self.temperature))
        if self.top_k:
            warpers.append(TopKLogitsWarper(self.top_k))
        if self.top_p is not None and self.top_p < 1.0:
            warpers.append(TopPLogitsWarper(self.top_p))
        return warpers


@dataclass(frozen=True)
class SampledDrafts:
    """``n`` drafts per row, ``tokens [B, n, g]`` (device), and their proposal laws
    ``q [B, n, g, V]``: ``q[b, i, j]`` is the law draft i's token j was drawn from, given its
    first j tokens (float32, device)."""

    tokens: Tensor
    q: Tensor


@dataclass
class Proposal:
    """The device half of drafting from the heads' logits ``[B, g, V]``.

    Only ``to_host`` goes to the host (with the step's accepted lengths, in one transfer).
    """

    to_host: list[Tensor]
    sampled: SampledDrafts | None = None  #: drafts finished on the device (sampling without an LM)
    #: sampling with an LM: the heads' processed law outside its top-k, renormalised [B, g, V]
    #: (device); the host only sees the top-k and the mass outside it.
    rest: Tensor | None = None
    #: device tensors the host half works on without copying them (e.g. a neural rescorer's
    #: candidates, scored on the device)
    kept: tuple[Tensor, ...] = ()
    #: drafts sampled per row (0: deterministic drafts)
    draws: int = 0


class Drafter(Protocol):
    """The one drafter interface of the engine (lattice p-best with or without an n-gram LM,
    sampled lattice drafts, neural rescoring, oracle).

    A drafter that cannot draft for every sampling rule says which it can in ``sample_rules``
    (a tuple of :data:`draftlattice.verify.sampled.SAMPLE_RULES`; ``()``: greedy decoding only;
    absent: all), and the engine refuses the others when it is made. Optional too:
    ``reads_heads`` (false: ``propose`` gets None and the engine runs no heads) and ``layouts``
    (the verification layouts its drafts fit; absent: all)."""

    name: str
    p: int  #: drafts per row and step (deterministic drafts)

    def propose(self, head_logits: Tensor, sampling: Sampling | None, draws: int) -> Proposal:
        """Device half. ``draws``: drafts to sample per row (0: deterministic drafts, also in
        sampling mode, e.g. for the tree rule); ``sampling`` None in greedy mode."""
        ...

    def finish(
        self, proposal: Proposal, host: list[Tensor], contexts: list[list[int]], device: torch.device
    ) -> tuple[Tensor, SampledDrafts | None]:
        """Host half: ``(drafts [B, p', g], sampled or None)`` (deterministic drafts may end early:
        ``-1`` past a shorter draft's end). ``host`` is ``proposal.to_host``
        copied to the host; ``contexts[b]``: row b's tokens so far (prompt without padding,
        generated, and the known next token). Deterministic drafts may stay on the host (the
        token tree is built there); sampled drafts are on ``device``."""
        ...


def to_host(tensors: list[Tensor]) -> list[Tensor]:
    """Copy device tensors to the host with one synchronisation (pinned, non-blocking copies)."""
    if not tensors or tensors[0].device.type != "cuda":
        return [t.cpu() for t in tensors]
    host = [t.to("cpu", non_blocking=True) for t in tensors]
    torch.cuda.current_stream(tensors[0].device).synchronize()
    return host


def topk_lattice(head_logits: Tensor, k: int, temperature: float = 1.0) -> tuple[Tensor, Tensor]:
    """Top-k ``(ids [B, g, k], logprobs [B, g, k] float32)`` of ``log_softmax(logits / T)``.

    On the CPU the core scans each head once (:func:`draftlattice._core.topk_logprobs`: ties to
    the lower id, NaN or +inf logits a ValueError): PyTorch's ``log_softmax`` then ``topk`` took
    ~0.28 ms for 3 heads x 49,152 on one thread, the core ~0.12 ms."""
    if head_logits.device.type == "cpu" and not head_logits.requires_grad:
        lead, vocab = head_logits.shape[:-1], head_logits.shape[-1]
        rows = head_logits.detach().float().reshape(-1, vocab).numpy()
        ids, logprobs = _core.topk_logprobs(rows, k, temperature)
        return torch.from_numpy(ids).to(torch.int64).view(*lead, -1), torch.from_numpy(logprobs).view(*lead, -1)
    scaled = head_logits.float()
    if temperature != 1.0:  # dividing by 1 would only copy [B, g, V]
        scaled = scaled / temperature
    logprobs = torch.log_softmax(scaled, dim=-1)
    values, ids = logprobs.topk(k, dim=-1)
    return ids, values
