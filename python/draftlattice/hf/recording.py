"""Recording what each decoding step drafted and accepted (``draft_recorder=`` of generate()).

For a report of a decoding run (``draftlattice demo --html``): per batch row and verification
step, the token the target had already chosen (the step's root), the heads' top-k lattice, the
p best drafts of the heads alone and the drafts verified (after n-gram rescoring), which draft
was accepted and how far. Recording costs one extra top-k and host transfer per step; without a
recorder generate() does none of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from .drafting import pbest_paths, topk_lattice


@dataclass
class RecordedStep:
    """One verification step of one row (token ids; ``lattice_*`` are ``[g, k]``)."""

    root: int  #: the target's own token (chosen by the previous forward), committed with this step
    lattice_ids: list[list[int]]
    lattice_probs: list[list[float]]
    drafts_before: list[list[int]]  #: the p best drafts of the heads' lattice alone
    drafts_after: list[list[int]] | None  #: the drafts verified, when an LM rescored them
    chosen: int  #: index of the verified draft whose prefix was accepted
    accepted: list[int]  #: the accepted draft tokens


@dataclass
class StepRecorder:
    """Collects :class:`RecordedStep` per batch row; ``last[b]`` is the row's final own token."""

    k: int = 8
    steps: dict[int, list[RecordedStep]] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    _lattice: tuple[Tensor, Tensor] | None = None

    def lattice(self, head_logits: Tensor) -> None:
        """Keep the top-k lattice of the heads' logits ``[B, g, V]`` (host copies)."""
        ids, logprobs = topk_lattice(head_logits, min(self.k, head_logits.shape[-1]))
        self._lattice = (ids.cpu(), logprobs.exp().cpu())

    def step(self, row: int, root: int, drafts: Tensor, num: int, accepted: list[int], rescored: bool) -> None:
        """Record row ``row``'s step: its verified ``drafts [p, g]`` and ``num`` accepted tokens."""
        ids, probs = self._lattice
        p = drafts.shape[0]
        before = pbest_paths(ids[row : row + 1], probs[row : row + 1].log(), p)[0].tolist()
        verified = drafts.tolist()
        chosen = next((i for i, d in enumerate(verified) if d[:num] == accepted[:num]), 0)
        self.steps.setdefault(row, []).append(
            RecordedStep(
                root=root,
                lattice_ids=ids[row].tolist(),
                lattice_probs=probs[row].tolist(),
                drafts_before=before,
                drafts_after=verified if rescored else None,
                chosen=chosen,
                accepted=accepted[:num],
            )
        )

    def finish(self, row: int, token: int) -> None:
        self.last[row] = int(token)
