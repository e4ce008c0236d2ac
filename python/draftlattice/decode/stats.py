"""Per-run statistics of blockwise decoding.

A *serial call* is one forward pass of the target model on the critical path: the prefill of the
prompt and one verification forward per decoding step. Rows verified together in one call (p
drafts batched, or a tree) count once. With this count plain greedy decoding has block efficiency
exactly 1.0, and blockwise decoding with h heads approaches h when every draft is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DecodeStats:
    """Counters of one or more decoding runs (``+`` adds runs together).

    Attributes:
        serial_calls: target forward passes on the critical path (prefill + one per step).
        prefill_calls: how many of ``serial_calls`` were prompt prefills (one per run).
        new_tokens: tokens generated (after truncation to ``max_new_tokens`` / EOS).
        block_sizes: histogram; ``block_sizes[n]`` is the number of decoding steps that committed
            n tokens (the step's known next token plus n - 1 accepted draft tokens), 1 <= n <= h.
            Index 0 is unused (always 0).
        drafting_seconds: wall time spent in the drafter (lattice rescoring, neural LM, ...).
        verification_seconds: wall time of the verification forwards and acceptance.
        prefill_seconds: wall time of the prompt prefills.
    """

    serial_calls: int = 0
    prefill_calls: int = 0
    new_tokens: int = 0
    block_sizes: list[int] = field(default_factory=list)
    drafting_seconds: float = 0.0
    verification_seconds: float = 0.0
    prefill_seconds: float = 0.0

    def record_step(self, committed: int) -> None:
        """Counts one decoding step that committed ``committed`` (>= 1) tokens."""
        if committed < 1:
            raise ValueError(f"a decoding step commits at least one token, got {committed}")
        if len(self.block_sizes) <= committed:
            self.block_sizes.extend([0] * (committed + 1 - len(self.block_sizes)))
        self.block_sizes[committed] += 1

    @property
    def steps(self) -> int:
        """Decoding steps (verification forwards), i.e. serial calls minus prefills."""
        return self.serial_calls - self.prefill_calls

    @property
    def block_efficiency(self) -> float:
        """Tokens generated per serial call, prefill included (plain greedy decoding = 1.0)."""
        return self.new_tokens / self.serial_calls if self.serial_calls else 0.0

    @property
    def mean_block_size(self) -> float:
        """Mean tokens committed per decoding step (Stern et al.'s mean accepted block size)."""
        steps = sum(self.block_sizes)
        return sum(n * c for n, c in enumerate(self.block_sizes)) / steps if steps else 0.0

    def __add__(self, other: DecodeStats) -> DecodeStats:
        size = max(len(self.block_sizes), len(other.block_sizes))
        pad = lambda xs: xs + [0] * (size - len(xs))  # noqa: E731
        return DecodeStats(
            serial_calls=self.serial_calls + other.serial_calls,
            prefill_calls=self.prefill_calls + other.prefill_calls,
            new_tokens=self.new_tokens + other.new_tokens,
            block_sizes=[a + b for a, b in zip(pad(self.block_sizes), pad(other.block_sizes))],
            drafting_seconds=self.drafting_seconds + other.drafting_seconds,
            verification_seconds=self.verification_seconds + other.verification_seconds,
            prefill_seconds=self.prefill_seconds + other.prefill_seconds,
        )

    def summary(self) -> str:
        """One line for logs and the CLI."""
        return (
            f"{self.new_tokens} tokens in {self.serial_calls} serial calls "
            f"(block efficiency {self.block_efficiency:.3f}, mean block {self.mean_block_size:.3f}); "
            f"drafting {self.drafting_seconds:.2f}s, verification {self.verification_seconds:.2f}s"
        )
