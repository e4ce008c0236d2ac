"""What the demo prints and writes: the rows' table, the JSON of ``--json``, a few texts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .demo import DemoSettings, Row
from .demo_prompts import DemoPrompt


@dataclass
class DemoReport:
    """The demo's rows over its prompts; ``decode`` turns token ids into text."""

    settings: DemoSettings
    prompts: list[DemoPrompt]
    rows: list[Row]
    decode: Callable[[list[int]], str]
    model: str
    lm: str
    dtype: str
    notes: list[str] = field(default_factory=list)

    @property
    def reference(self) -> Row:
        return self.rows[0]

    def reference_of(self, row: Row) -> Row:
        """The plain decoding ``row`` should agree with: ``generate`` or, for rows run by the lean
        step, its own plain greedy row (the same weights)."""
        return next((r for r in self.rows if r.name == row.spec.reference), self.reference)

    def drafted(self) -> list[Row]:
        """The rows that verify drafts of their own (not plain decoders, not prompt lookup)."""
        return [r for r in self.rows if r.spec.verifier != "-" and r.name != "prompt_lookup"]

    def agreement(self, row: Row) -> tuple[int, int, int, int]:
        """(outputs equal to its reference's, outputs, tokens before each output's first
        difference from the reference's, the reference's tokens): how far a row agrees with
        plain decoding of the same weights."""
        reference = self.reference_of(row).outputs
        same = sum(list(a) == list(b) for a, b in zip(row.outputs, reference))
        prefix = sum(_common_prefix(a, b) for a, b in zip(row.outputs, reference))
        return same, len(reference), prefix, sum(len(b) for b in reference)

    def agreement_note(self) -> str | None:
        """Why drafted outputs can differ from generate()'s, or that they do not; None when sampling."""
        if self.settings.sampling:
            return None
        drafted = self.drafted()
        if all(r.identical for r in drafted):
            references = {self.reference_of(r).name for r in drafted}
            if references == {self.reference.name}:
                return f"{self.dtype}: every drafted output is token for token generate()'s (checked)."
            names = ", ".join(sorted(references))
            return (
                f"{self.dtype}: every drafted output is token for token its reference's ({names}: plain "
                "greedy decoding of the same weights; checked)."
            )
        return (
            f"In {self.dtype} a drafted row verifies several tokens in one forward, which rounds "
            "differently from generate()'s one token at a time; where two tokens are nearly tied the "
            "other one can win, and the texts part from there (transformers' own prompt lookup does "
            'the same). "Tokens" counts the tokens before each output\'s first difference. '
            "--dtype float32 makes every drafted output identical to generate()'s, and the demo checks it."
        )

    def speedup(self, row: Row) -> float:
        base = self.reference.tokens_per_s
        return row.tokens_per_s / base if base else 0.0

    def table(self) -> str:
        """The rows' table: tokens/s against generate() and, where those rows ran, against plain
        llama.cpp and plain decoding on the lean step (the reference a drafted row must beat)."""
        sampling = self.settings.sampling
        others = [r for r in self.rows if r.name in ("llama_cpp", "lean")]
        lines = [
            "| row | settings | verifier | block efficiency | tokens/s | speedup | "
            + "".join(f"vs {r.name} | " for r in others)
            + ("calls | tokens |" if sampling else "= generate |"),
            "|---|---|---|---:|---:|---:|" + "---:|" * len(others) + ("---:|---:|" if sampling else "---|"),
        ]
        for row in self.rows:
            last = (
                f"{row.calls} | {row.tokens} |"
                if sampling
                else ("(reference) |" if self.reference_of(row) is row else f"{self._agreement_cell(row)} |")
            )
            ratios = "".join(f"{row.tokens_per_s / r.tokens_per_s if r.tokens_per_s else 0.0:.2f}x | " for r in others)
            lines.append(
                f"| {row.name} | {row.spec.settings} | {row.spec.verifier} | {row.block_efficiency:.3f} "
                f"| {row.tokens_per_s:.1f} | {self.speedup(row):.2f}x | {ratios}{last}"
            )
        return "\n".join(lines)

    def _agreement_cell(self, row: Row) -> str:
        same, n, prefix, total = self.agreement(row)
        cell = f"{same}/{n}" if same == n else f"{same}/{n}, {100 * prefix / max(total, 1):.0f}% of tokens"
        reference = self.reference_of(row)
        return cell if reference is self.reference else f"{cell} (vs {reference.name})"

    def to_json(self) -> dict:
        """``demo --json``: ``{"rows": [...], "outputs": [text per prompt], ...}``."""
        rows = [
            {
                "name": row.name,
                "settings": row.spec.settings,
                "verifier": row.spec.verifier,
                "block_efficiency": row.block_efficiency,
                "tokens_per_s": row.tokens_per_s,
                "speedup": self.speedup(row),
                "identical": row.identical if row is not self.reference else True,
                "agreeing": row.agreeing if row is not self.reference else len(self.prompts),
                # tokens before each output's first difference from generate()'s, of generate()'s tokens
                "agreeing_tokens": list(self.agreement(row)[2:]) if not self.settings.sampling else None,
                "serial_calls": row.calls,
                "tokens": row.tokens,
                "seconds": row.seconds,
                "mean_accepted": sum(row.accepted) / len(row.accepted) if row.accepted else None,
            }
            for row in self.rows
        ]
        out = {
            "mode": "sampling" if self.settings.sampling else "greedy",
            "model": self.model,
            "lm": self.lm,
            "dtype": self.dtype,
            "prompts": [{"kind": p.kind, "text": p.text} for p in self.prompts],
            "rows": rows,
            "outputs": [self.decode(ids) for ids in self.reference.outputs],
        }
        if self.settings.sampling:
            out["sampling"] = {"temperature": self.settings.temperature, "top_p": self.settings.top_p}
        return out

    def render(self, examples: int = 2) -> str:
        st = self.settings
        chat = sum(p.kind == "chat" for p in self.prompts)
        mode = f"sampling at T={st.temperature} top-p={st.top_p}" if st.sampling else "greedy"
        out = [
            f"draftlattice demo: {self.model} ({self.dtype}), {mode}; {chat} chat + "
            f"{len(self.prompts) - chat} text prompts x {st.max_new_tokens} new tokens",
            f"n-gram LM {self.lm}",
            "",
            self.table(),
            "",
            "block efficiency = new tokens / serial calls of the target (the prompt's forward included).",
        ]
        out += [f"note: {note}" for note in self.notes]
        for prompt, ids in list(zip(self.prompts, self.reference.outputs))[:examples]:
            out += ["", f"[{prompt.kind}] {prompt.text}", f"  -> {self.decode(ids)!r}"]
        if not st.sampling:
            out += ["", self.identity_line()]
        return "\n".join(out)

    def identity_line(self) -> str:
        drafted = self.drafted()
        n = len(self.prompts)
        agree = sum(r.agreeing for r in drafted)
        lean = next((r for r in self.rows if r.name == "lean"), None)
        if all(r.identical for r in drafted):
            if lean is None:
                return f"Checked: all {agree} drafted outputs ({len(drafted)} rows x {n} prompts) equal generate()'s."
            same = "equal" if lean.identical else f"agree on {lean.agreeing} of {n} with"
            return (
                f"Checked: all {agree} drafted outputs ({len(drafted)} rows x {n} prompts) equal the lean step's "
                f"plain greedy outputs, which {same} generate()'s."
            )
        lookup = next((r for r in self.rows if r.name == "prompt_lookup"), None)
        prefix = sum(self.agreement(r)[2] for r in drafted)
        total = sum(self.agreement(r)[3] for r in drafted)
        reference = "generate()'s" if lean is None else "their plain greedy reference's"
        text = (
            f"{agree} of {len(drafted) * n} drafted outputs equal {reference}, and {100 * prefix / max(total, 1):.0f}% "
            "of their tokens come before the first difference"
        )
        if self.dtype != "float32":
            text += (
                f" (in {self.dtype}, verifying several tokens in one forward rounds differently from one at "
                "a time; --dtype float32 makes every row identical)"
            )
            if lookup is not None:
                text += f"; transformers' prompt lookup: {lookup.agreeing} of {n}"
        return text + "."


def _common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
