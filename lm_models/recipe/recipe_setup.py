"""What every recipe does first (a log in its work folder and on stderr, the torch threads, the
device, the model in bf16 on it) and last (the held-out accuracies written and logged)."""

from __future__ import annotations

import json
import logging
import lzma
import sys
from pathlib import Path

import torch


def start(work: Path, threads: int | None = None, device: str | None = None) -> torch.device:
    """Log to stderr and ``work/recipe.log`` (appended: a rerun resumes); CUDA when there is a GPU."""
    work.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(name)s: %(message)s",
        handlers=[logging.StreamHandler(sys.stderr), logging.FileHandler(work / "recipe.log")],
    )
    if threads:
        torch.set_num_threads(threads)
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def load_model(folder: Path | None, device: torch.device):
    """``(tokenizer, model)`` of ``folder`` or of the fetched default model: bf16, eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from draftlattice.default_model import fetch_default

    folder = folder or fetch_default()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16).to(device).eval()
    logging.getLogger("recipe").info("model %s on %s", folder, device)
    return tokenizer, model


def write_accuracy(report: dict, path: Path) -> None:
    """The held-out accuracies (``{name: head_accuracy rows}``) as JSON in ``path``, and a log line each."""
    path.write_text(json.dumps(report, indent=2) + "\n")
    for name, rows in report.items():
        logging.getLogger("recipe").info(
            "held-out, %s: %s",
            name,
            " | ".join(f"head{r['head']} top1 {r['top1']:.3f} top8 {r['top8']:.3f}" for r in rows),
        )


def read_prompts(path: Path):
    """A JSON list of ``[kind, text]`` prompts (``.json``, or ``.json.xz``)."""
    from draftlattice.training.distillation_prompts import Prompt

    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [Prompt(kind, text) for kind, text in json.load(f)]


def training_prompts(prompts_file: Path | None, data: Path, n: int):
    """The first ``n`` training prompts: of ``prompts_file``, else drawn from the enwiki sample
    (seed 0, so every recipe draws the same list)."""
    from draftlattice.training.distillation_prompts import distillation_prompts

    if prompts_file:
        return read_prompts(prompts_file)[:n]
    return distillation_prompts(data / "enwiki-sample" / "enwiki-sample.txt.xz", n, seed=0)


def heldout_prompts(data: Path, n: int = 192):
    """``n`` held-out prompts from WikiText-2 raw *valid* (never seen in training), half chat."""
    from draftlattice.training.distillation_prompts import distillation_prompts

    return distillation_prompts(data / "wikitext-2-raw" / "valid.txt", n, seed=2, chat_share=0.5)
