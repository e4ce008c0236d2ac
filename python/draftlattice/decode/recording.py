"""Watching the engine's steps: what each step drafted and accepted, and the heads on the path.

:class:`StepObserver` is what the engine calls (every method does nothing by default).
:class:`StepRecorder` (``draft_recorder=`` of generate()) keeps, for a report of a decoding run (``draftlattice demo --html``): per batch row and verification
step, the token the target had already chosen (the step's root), the heads' top-k lattice, the
p best drafts of the heads alone and the drafts verified (after n-gram rescoring), which draft
was accepted and how far. Recording costs one extra top-k and host transfer per step; without a
recorder generate() does none of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from .drafters.base import topk_lattice
from .drafters.lattice import pbest_paths


class StepObserver:
    """Hooks the engine calls during a run (subclass and override what you need)."""

    def drafted(self, head_logits: Tensor) -> None:
        """The heads' logits ``[B, g, V]`` the next drafts come from (after the prefill and
        after each step)."""

    def committed(self, row: int, root: int, drafts: Tensor, num: int, tokens: list[int], rescored: bool) -> None:
        """Row ``row``'s step: its root, verified ``drafts [p, g]``, ``num`` accepted draft
        tokens and the committed tokens (accepted + the target's next one), before stopping."""

    def path(self, hidden: Tensor, scores: Tensor, committed: list[list[int]], draft_heads) -> None:
        """The committed path of this call: ``committed[b]`` are the tokens row b committed
        (after stopping); ``hidden[b, j]`` ``[B, n, d]`` is the hidden state that chose
        ``committed[b][j]`` and ``scores[b, j]`` ``[B, n, V]`` the target's float32 scores that
        chose it (after the logits processors); ``draft_heads(hidden, next_ids) -> [..., h-1, V]``
        gives heads 2..h there, ``next_ids [...]`` being the tokens those states chose (the
        committed ones; heads that read the next token need them)."""

    def finished(self, row: int, token: int) -> None:
        """The run ended; ``token`` is row ``row``'s last root."""


@dataclass
class RecordedStep:
    """One verification step of one row (token ids; ``lattice_*`` are ``[g, k]``)."""

    root: int  #: the target's own token (chosen by the previous forward), committed with this step
    lattice_ids: list[list[int]]
    lattice_probs: list[list[float]]
    drafts_before: list[list[int]]  #: the p best drafts of the heads' lattice alone
    drafts_after: list[list[int]] | None  #: the drafts verified, when not drafts_before (rescored, best prefixes)
    chosen: int  #: index of the verified draft whose prefix was accepted
    accepted: list[int]  #: the accepted draft tokens


@dataclass
class StepRecorder(StepObserver):
    """Collects :class:`RecordedStep` per batch row; ``last[b]`` is the row's final own token."""

    k: int = 8
    steps: dict[int, list[RecordedStep]] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    _lattice: tuple[Tensor, Tensor] | None = None

    def drafted(self, head_logits: Tensor) -> None:
        """Keep the top-k lattice of the heads' logits ``[B, g, V]`` (host copies)."""
        ids, logprobs = topk_lattice(head_logits, min(self.k, head_logits.shape[-1]))
        self._lattice = (ids.cpu(), logprobs.exp().cpu())

    def committed(self, row: int, root: int, drafts: Tensor, num: int, accepted: list[int], rescored: bool) -> None:
        """Record row ``row``'s step: its verified ``drafts [p, g]`` and ``num`` accepted tokens."""
        ids, probs = self._lattice
        p = drafts.shape[0]
        before = pbest_paths(ids[row : row + 1], probs[row : row + 1].log(), p)[0].tolist()
        verified = [[t for t in draft if t >= 0] for draft in drafts.tolist()]  # -1 ends a shorter draft
        chosen = next((i for i, d in enumerate(verified) if d[:num] == accepted[:num]), 0)
        self.steps.setdefault(row, []).append(
            RecordedStep(
                root=root,
                lattice_ids=ids[row].tolist(),
                lattice_probs=probs[row].tolist(),
                drafts_before=before,
                # verified drafts that are not the heads' own p best: rescored, or a tree of best prefixes
                drafts_after=verified if rescored or verified != before else None,
                chosen=chosen,
                accepted=accepted[:num],
            )
        )

    def finished(self, row: int, token: int) -> None:
        self.last[row] = int(token)
