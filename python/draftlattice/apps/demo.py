"""The demo's work (``draftlattice demo``): load the shipped artifacts, pick WikiText-2 prompts,
compare drafters, and render the report as text (the CLI prints it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..decode import DecodeStats
from ..decode.drafters import LatticeDrafter, NeuralDrafter, OracleDrafter, VanillaDrafter
from ..evaluate.prompts import paragraph_prompts
from ..model import BlockwiseLM
from ..ngram import NgramLM
from ..pairing import check_lm_tokenizer_pair, check_same_tokenizer, check_tokenizer_fits
from ..tokenizer import load_tokenizer, tokenizer_sha256
from .compare import Comparison, DrafterSpec, DraftExample, ExampleRecorder, compare_drafters

logger = logging.getLogger(__name__)


@dataclass
class DemoSettings:
    """Sizes and drafter settings of the demo (defaults: about a minute on 2 CPU cores)."""

    num_prompts: int = 20
    prompt_tokens: int = 32
    max_new_tokens: int = 64
    k: int = 8
    p: int = 4
    alpha: float = 0.5
    neural_alpha: float = 0.5

    def __post_init__(self) -> None:
        for name in ("num_prompts", "prompt_tokens", "max_new_tokens", "k", "p"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.alpha < 0 or self.neural_alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha} / {self.neural_alpha}")


@dataclass
class DemoReport:
    """Everything the demo prints."""

    settings: DemoSettings
    model_dir: Path
    lm_path: Path
    comparison: Comparison
    examples: list[DraftExample]
    decode: Callable[[list[int]], str]
    notes: list[str] = field(default_factory=list)

    @property
    def all_identical(self) -> bool:
        return all(row.identical for row in self.comparison.rows)

    def table(self) -> str:
        """Markdown table of the rows (block efficiency = tokens per serial call, prefill included)."""
        lines = [
            "| drafter | settings | verifier | block efficiency | mean block | serial calls | tokens "
            "| drafting s | verification s | total s | tokens/s | = greedy |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for row in [self.comparison.greedy, *self.comparison.rows]:
            s = row.stats
            lines.append(
                f"| {row.label} | {row.settings} | {row.verifier} | {s.block_efficiency:.3f} | {s.mean_block_size:.2f} "
                f"| {s.serial_calls} | {s.new_tokens} | {s.drafting_seconds:.2f} | {s.verification_seconds:.2f} "
                f"| {row.seconds:.2f} | {row.tokens_per_second:.1f} | {'yes' if row.identical else 'NO'} |"
            )
        return "\n".join(lines)

    def to_json(self) -> dict:
        """``demo --json``: ``{"rows": [{"name", "block_efficiency", "tokens_per_s", ...}],
        "outputs": [text per prompt]}``; the outputs are the target's greedy continuations (which
        every row reproduced when ``all_identical``)."""
        rows = [
            row_json(row.label, row.settings, row.verifier, row.stats, row.tokens_per_second)
            | {"identical": row.identical}
            for row in [self.comparison.greedy, *self.comparison.rows]
        ]
        return {
            "mode": "greedy",
            "rows": rows,
            "outputs": [self.decode(reference) for reference in self.comparison.references],
        }

    def render(self, num_examples: int = 3) -> str:
        st = self.settings
        out = [
            f"draftlattice demo: {st.num_prompts} WikiText-2 test prompts x {st.prompt_tokens} tokens, "
            f"{st.max_new_tokens} new tokens each",
            f"model {self.model_dir}  n-gram LM {self.lm_path}",
            "",
            self.table(),
            "",
            "block efficiency = generated tokens / serial target calls (prefill included); "
            "mean block = tokens committed per decoding step.",
        ]
        out += [f"note: {note}" for note in self.notes]
        if self.examples and num_examples > 0:
            out += [
                "",
                "Drafts before and after n-gram rescoring (tokens separated by '|'; "
                "[n] = tokens greedy verification accepts):",
            ]
            for ex in self.examples[:num_examples]:
                piece = lambda ids: "|".join(self.decode([t]) for t in ids)  # noqa: E731
                out += [
                    f"  context  ...{self.decode(ex.context[-12:])!r}",
                    f"  vanilla  [{ex.accepted(ex.vanilla)}] {piece(ex.vanilla)}",
                    f"  rescored [{ex.accepted(ex.rescored)}] {piece(ex.rescored)}",
                    f"  target       {piece(ex.target)}",
                    "",
                ]
        rows = self.comparison.rows
        total = len(self.comparison.references) * len(rows)
        if self.all_identical:
            out.append(
                f"Checked: all {total} blockwise outputs ({len(rows)} drafters x "
                f"{len(self.comparison.references)} prompts) are identical to greedy decoding of the target."
            )
        else:
            bad = ", ".join(row.label for row in rows if not row.identical)
            out.append(f"FAILED: outputs of {bad} differ from greedy decoding of the target.")
        return "\n".join(out)


def row_json(name: str, settings: str, verifier: str, stats: DecodeStats, tokens_per_second: float) -> dict:
    """One table row as ``demo --json`` writes it (the same numbers as the printed table)."""
    return {
        "name": name,
        "settings": settings,
        "verifier": verifier,
        "block_efficiency": stats.block_efficiency,
        "tokens_per_s": tokens_per_second,
        "mean_block": stats.mean_block_size,
        "serial_calls": stats.serial_calls,
        "tokens": stats.new_tokens,
    }


def load_ngram(path: Path, tokenizer_path: Path, allow_mismatch: bool = False) -> NgramLM:
    """Loads the n-gram LM and checks it was built over the model's tokenizer
    (``draftlattice.pairing``; TokenizerMismatchError unless ``allow_mismatch``)."""
    lm = NgramLM(path)
    check_lm_tokenizer_pair(
        lm.metadata,
        tokenizer_sha256(tokenizer_path),
        lm_name=str(path),
        tokenizer_name=str(tokenizer_path),
        allow_mismatch=allow_mismatch,
    )
    return lm


# Beyond this many candidates per head, each step's lattice work and the oracle search grow far
# past the paper's settings (k <= 16): minutes per step on a CPU.
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


def run_demo(
    model_dir: Path,
    lm_path: Path,
    data_path: Path,
    settings: DemoSettings,
    neural_dir: Path | None = None,
    progress: Callable | None = None,
    allow_mismatch: bool = False,
) -> DemoReport:
    """Runs the comparison on the shipped (or given) artifacts.

    Args:
        model_dir: BlockwiseLM directory (config.json, model.safetensors, tokenizer.json).
        lm_path: n-gram LM over the model's tokenizer.
        data_path: WikiText-2 test.txt.
        neural_dir: neural rescorer directory; default ``model_dir/../neural_rescorer`` if present.
        allow_mismatch: use an n-gram LM (or neural rescorer) built over another tokenizer than
            the model's, with a warning (default: TokenizerMismatchError).
    """
    model_dir = Path(model_dir)
    model = BlockwiseLM.from_pretrained(model_dir)
    tokenizer_path = model_dir / "tokenizer.json"
    if not tokenizer_path.is_file():
        tokenizer_path = model_dir.parent / "tokenizer.json"
    tokenizer = load_tokenizer(tokenizer_path)
    check_tokenizer_fits(tokenizer, model.config.vocab_size, tokenizer_name=str(tokenizer_path))
    check_candidates(settings.k, settings.p, model.config.vocab_size)
    lm = load_ngram(Path(lm_path), tokenizer_path, allow_mismatch)
    prompts = paragraph_prompts(data_path, tokenizer, settings.num_prompts, settings.prompt_tokens, spread=True)
    st, recorders, notes = settings, [], []

    def ngram_recorded(reference):
        recorder = ExampleRecorder(LatticeDrafter(lm, k=st.k, p=1, alpha=st.alpha), reference)
        recorders.append(recorder)
        return recorder

    specs = [
        DrafterSpec("vanilla", "argmax per head", lambda ref: VanillaDrafter()),
        DrafterSpec("ngram 1-best", f"k={st.k} alpha={st.alpha} {Path(lm_path).name}", ngram_recorded),
        DrafterSpec(
            f"ngram {st.p}-best",
            f"k={st.k} p={st.p} alpha={st.alpha}",
            lambda ref: LatticeDrafter(lm, k=st.k, p=st.p, alpha=st.alpha),
            "tree",
        ),
    ]
    neural_dir = Path(neural_dir) if neural_dir is not None else model_dir.parent / "neural_rescorer"
    if (neural_dir / "config.json").is_file():
        if (neural_dir / "tokenizer.json").is_file():
            check_same_tokenizer(
                tokenizer_sha256(tokenizer_path),
                neural_dir / "tokenizer.json",
                owner=f"neural rescorer {neural_dir}",
                allow_mismatch=allow_mismatch,
            )
        rescorer = BlockwiseLM.from_pretrained(neural_dir)
        specs.append(
            DrafterSpec(
                "neural",
                f"k={st.k} alpha={st.neural_alpha} {neural_dir.name}",
                lambda ref: NeuralDrafter(rescorer, k=st.k, alpha=st.neural_alpha),
            )
        )
    else:
        notes.append(f"no neural rescorer at {neural_dir}; its row is left out")
    specs.append(DrafterSpec("oracle", f"k={st.k} (needs the reference)", lambda ref: OracleDrafter(ref, k=st.k)))

    comparison = compare_drafters(model, prompts, st.max_new_tokens, specs, progress)
    return DemoReport(settings, model_dir, Path(lm_path), comparison, pick_examples(recorders), tokenizer.decode, notes)


def pick_examples(recorders: list[ExampleRecorder]) -> list[DraftExample]:
    """The most instructive step of each prompt (largest change in accepted tokens), distinct
    drafts only, biggest change first."""
    gain = lambda ex: ex.accepted(ex.rescored) - ex.accepted(ex.vanilla)  # noqa: E731
    picked, seen = [], set()
    for recorder in recorders:
        for ex in sorted(recorder.examples, key=lambda ex: -abs(gain(ex))):
            key = (tuple(ex.vanilla), tuple(ex.rescored))
            if key not in seen:
                seen.add(key)
                picked.append(ex)
                break
    return sorted(picked, key=lambda ex: -abs(gain(ex)))
