"""``draftlattice demo --temperature T``: lossless sampling with vanilla and lattice drafts.

Rows (every prompt decoded with the same seed by every row, so rows differ only by drafting):

* ``vanilla``: each head sampled from its processed law, block verification;
* ``ngram 1 draft``: one draft sampled from the full-support rescored lattice, block verification;
* ``ngram p-best tree``: the p best lattice drafts, tree rule (verifier "tree-sample");
* ``ngram p sampled``: p drafts sampled from the lattice, recursive rejection (verifier "multi").

Every row is lossless (its outputs follow the target's sampling law exactly), so the table only
compares speed: block efficiency (tokens per serial call, prefill included) and tokens/s.
``--json`` writes the rows and, as ``outputs``, the ``vanilla`` row's sampled continuations (one
per prompt; each row draws its own sample of the same law, so the rows' texts differ).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..decode import BlockwiseDecoder, DecodeStats, SamplingConfig
from ..decode.drafters import LatticeDrafter, VanillaDrafter
from ..evaluate.prompts import paragraph_prompts
from ..model import BlockwiseLM
from ..pairing import check_tokenizer_fits
from ..tokenizer import load_tokenizer
from .demo import DemoSettings, load_ngram, row_json
from .tune_sampling import SampleAlphaTuning, tune_sample_alpha


@dataclass
class SamplingRow:
    label: str
    settings: str
    verifier: str
    stats: DecodeStats
    seconds: float
    outputs: list[list[int]] = field(default_factory=list)  # per prompt, the sampled continuation

    @property
    def tokens_per_second(self) -> float:
        return self.stats.new_tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass
class SamplingReport:
    settings: DemoSettings
    sampling: SamplingConfig
    rows: list[SamplingRow]
    decode: Callable[[list[int]], str]
    tuning: SampleAlphaTuning | None = None  # when sample_alpha was tuned ("auto")

    def table(self) -> str:
        base = self.rows[0]
        lines = [
            "| drafter | settings | verifier | block efficiency | vs vanilla | tokens/s | vs vanilla |",
            "|---|---|---|---:|---:|---:|---:|",
        ]
        for row in self.rows:
            be, tps = row.stats.block_efficiency, row.tokens_per_second
            lines.append(
                f"| {row.label} | {row.settings} | {row.verifier} | {be:.3f} | {be / base.stats.block_efficiency:.3f} "
                f"| {tps:.1f} | {tps / base.tokens_per_second:.2f} |"
            )
        return "\n".join(lines)

    def to_json(self) -> dict:
        """``demo --temperature T --json``: the rows and the ``vanilla`` row's sampled texts."""
        sp = self.sampling
        return {
            "mode": "sampling",
            "sampling": {
                "temperature": sp.temperature,
                "top_k": sp.top_k,
                "top_p": sp.top_p,
                "repetition_penalty": sp.repetition_penalty,
            },
            "rows": [
                row_json(row.label, row.settings, row.verifier, row.stats, row.tokens_per_second) for row in self.rows
            ],
            "outputs": [self.decode(tokens) for tokens in self.rows[0].outputs],
            **({"sample_alpha_tuning": self.tuning.to_json()} if self.tuning else {}),
        }

    def render(self) -> str:
        st, sp = self.settings, self.sampling
        tuned = []
        if self.tuning is not None:
            t = self.tuning
            tuned = [
                f"sample_alpha tuned on {t.positions} positions of held-out calibration prompts "
                f"({t.rule} rule, p={t.p}): {t.best.alpha:g}",
                "",
                t.table(),
                "",
            ]
        return "\n".join(
            [
                *tuned,
                (
                    f"draftlattice demo (sampling: temperature {sp.temperature}, top-k {sp.top_k}, top-p {sp.top_p}): "
                    f"{st.num_prompts} WikiText-2 test prompts x {st.prompt_tokens} tokens, {st.max_new_tokens} new tokens each"
                ),
                "",
                self.table(),
                "",
                (
                    "Every row samples exactly from the target's law (lossless verification); block efficiency = "
                    "generated tokens / serial target calls (prefill included)."
                ),
            ]
        )


def run_sampling_demo(
    model_dir: Path,
    lm_path: Path,
    data_path: Path,
    settings: DemoSettings,
    sampling: SamplingConfig,
    sample_alpha: float | str = 0.2,
    seed: int = 0,
    progress: Callable | None = None,
    allow_mismatch: bool = False,
    calibration_path: Path | None = None,
    calibration_prompts: int = 8,
) -> SamplingReport:
    """Decodes the demo prompts with each sampling row (see the module docstring).

    ``sample_alpha="auto"``: tuned first by :func:`tune_sample_alpha` on ``calibration_prompts``
    prompts of ``calibration_path`` (WikiText-2 valid: held out from the test prompts), for the
    ``ngram p sampled`` row's rule and p; both lattice rows then use it."""
    model = BlockwiseLM.from_pretrained(Path(model_dir))
    tokenizer_path = Path(model_dir) / "tokenizer.json"
    if not tokenizer_path.is_file():
        tokenizer_path = Path(model_dir).parent / "tokenizer.json"
    tokenizer = load_tokenizer(tokenizer_path)
    check_tokenizer_fits(tokenizer, model.config.vocab_size, tokenizer_name=str(tokenizer_path))
    lm = load_ngram(Path(lm_path), tokenizer_path, allow_mismatch)
    prompts = paragraph_prompts(data_path, tokenizer, settings.num_prompts, settings.prompt_tokens, spread=True)
    st, tuning = settings, None
    if sample_alpha == "auto":
        if calibration_path is None:
            raise ValueError("sample_alpha='auto' needs calibration prompts (calibration_path)")
        held_out = paragraph_prompts(calibration_path, tokenizer, calibration_prompts, st.prompt_tokens, spread=True)
        tuning = tune_sample_alpha(
            model,
            lm,
            held_out,
            sampling,
            k=st.k,
            p=st.p,
            max_new_tokens=st.max_new_tokens,
            seed=seed,
            progress=progress,
        )
        sample_alpha = tuning.best.alpha
    elif isinstance(sample_alpha, str):
        raise ValueError(f"sample_alpha must be a weight >= 0 or 'auto', got {sample_alpha!r}")
    specs = [
        ("vanilla", "each head sampled", "block", VanillaDrafter()),
        (
            "ngram 1 draft",
            f"k={st.k} sample_alpha={sample_alpha}, full support",
            "block",
            LatticeDrafter(lm, k=st.k, sample_alpha=sample_alpha),
        ),
        (
            f"ngram {st.p}-best tree",
            f"k={st.k} p={st.p} alpha={st.alpha}",
            "tree-sample",
            LatticeDrafter(lm, k=st.k, p=st.p, alpha=st.alpha),
        ),
        (
            f"ngram {st.p} sampled",
            f"k={st.k} p={st.p} sample_alpha={sample_alpha}, full support",
            "multi",
            LatticeDrafter(lm, k=st.k, p=st.p, sample_alpha=sample_alpha),
        ),
    ]
    rows = []
    for label, description, verifier, drafter in specs:
        decoder = BlockwiseDecoder(model, drafter, verifier, sampling)
        stats, outputs = DecodeStats(), []
        start = time.perf_counter()
        items = progress(prompts, desc=label) if progress else prompts
        for i, prompt in enumerate(items):
            generator = torch.Generator().manual_seed(seed + i)
            result = decoder.generate(prompt, st.max_new_tokens, generator=generator)
            stats += result.stats
            outputs.append(result.tokens)
        rows.append(SamplingRow(label, description, verifier, stats, time.perf_counter() - start, outputs))
    return SamplingReport(settings, sampling, rows, tokenizer.decode, tuning)
