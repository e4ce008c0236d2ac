"""What every recipe does first (a log in its work folder and on stderr, the torch threads, the
device, the model in bf16 on it) and last (the held-out accuracies written and logged)."""

from __future__ import annotations

import json
import logging
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
