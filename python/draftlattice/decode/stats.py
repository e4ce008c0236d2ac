"""What a decoding run cost: the one statistics type of live decoding and of trace replay.

A *target call* is one forward of the base model on the critical path: the prompt's prefill and
one verification forward per step. Rows verified together in one call (a batch of sequences, p
drafts, or a tree) count once. Each step gives every running row its ``a`` accepted draft tokens
plus the target's own next token, so plain greedy decoding has block efficiency 1.0 and drafts of
``h - 1`` tokens approach ``h``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DecodeStats:
    """Counters of one or more decoding runs (``+`` adds runs together).

    Attributes:
        target_calls: forwards of the base model on the critical path (prefills included).
        prefill_calls: how many of ``target_calls`` were prompt prefills.
        accepted: per verification call, the draft tokens each row still running accepted and
            kept (a stop inside the block, at EOS or the length limit, drops the rest).
        new_tokens: tokens generated over all rows (EOS included, padding not).
        drafting_seconds: the drafter's two halves (top-k, p-best paths or draws on the device;
            LM rescoring, lattice sampling or neural rescoring on the host). On CUDA the device
            half is only launched here: its time shows in the transfer that waits for it.
        verification_seconds: the rest of each step: the verification forward (whose output
            projection also gives the draft heads' logits), acceptance, the one device->host
            transfer, cache rollback and compaction.
        forward_seconds: of ``verification_seconds``, the target's forwards and output
            projections alone (wall time on the host; on an accelerator, their launches): the
            rest of a step is the engine's and the drafter's own work.
        prefill_seconds: the prompt forwards and the first drafts.
        nodes: tokens the verification forwards computed per sequence, summed over the calls
            (a tree's nodes, or p chains' tokens): what the step's cost grows with.
    """

    target_calls: int = 0
    prefill_calls: int = 0
    accepted: list[list[int]] = field(default_factory=list)
    new_tokens: int = 0
    drafting_seconds: float = 0.0
    verification_seconds: float = 0.0
    prefill_seconds: float = 0.0
    nodes: int = 0
    forward_seconds: float = 0.0

    def record_step(self, accepted: list[int]) -> None:
        """One verification call that accepted ``accepted[r]`` draft tokens in running row r."""
        if any(a < 0 for a in accepted):
            raise ValueError(f"accepted draft tokens must be >= 0, got {accepted}")
        self.target_calls += 1
        self.accepted.append(list(accepted))

    @property
    def steps(self) -> int:
        """Verification calls."""
        return len(self.accepted)

    @property
    def row_calls(self) -> int:
        """Verification calls summed over the rows taking part in them."""
        return sum(len(a) for a in self.accepted)

    @property
    def mean_accepted(self) -> float:
        """Mean draft tokens accepted per row per verification call."""
        return sum(map(sum, self.accepted)) / self.row_calls if self.row_calls else 0.0

    @property
    def tokens_per_call(self) -> float:
        """Mean tokens a row gains per verification call (accepted + 1), the prefill left out."""
        return 1.0 + self.mean_accepted if self.row_calls else 0.0

    @property
    def block_efficiency(self) -> float:
        """Tokens generated per serial target call, prefill included (greedy decoding = 1.0);
        for one row at a time, which is how it is reported."""
        return self.new_tokens / self.target_calls if self.target_calls else 0.0

    @property
    def mean_nodes(self) -> float:
        """Tokens per sequence in a verification forward, on average."""
        return self.nodes / self.steps if self.steps else 0.0

    @property
    def block_sizes(self) -> list[int]:
        """Histogram: ``block_sizes[n]`` is the number of row steps that committed n tokens."""
        sizes = [0] * (2 + max((max(a, default=0) for a in self.accepted), default=0))
        for call in self.accepted:
            for a in call:
                sizes[a + 1] += 1
        return sizes

    def __add__(self, other: DecodeStats) -> DecodeStats:
        return DecodeStats(
            target_calls=self.target_calls + other.target_calls,
            prefill_calls=self.prefill_calls + other.prefill_calls,
            accepted=self.accepted + other.accepted,
            new_tokens=self.new_tokens + other.new_tokens,
            drafting_seconds=self.drafting_seconds + other.drafting_seconds,
            verification_seconds=self.verification_seconds + other.verification_seconds,
            prefill_seconds=self.prefill_seconds + other.prefill_seconds,
            nodes=self.nodes + other.nodes,
            forward_seconds=self.forward_seconds + other.forward_seconds,
        )

    def summary(self) -> str:
        """One line for logs and the CLI."""
        return (
            f"{self.new_tokens} tokens in {self.target_calls} target calls "
            f"(block efficiency {self.block_efficiency:.3f}, {self.tokens_per_call:.2f} tokens/call/row); "
            f"drafting {self.drafting_seconds:.3f} s, verification {self.verification_seconds:.3f} s"
        )
