"""A models folder for `draftlattice demo` tests: a random tiny blockwise model (and rescorer)
over the shipped tokenizer, with the shipped 2-gram LM, so the demo's plumbing runs in seconds."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from draftlattice.model import BlockwiseConfig, BlockwiseLM

SHIPPED = Path(__file__).resolve().parents[1] / "lm_models"
# demo options that keep a run small: 2 prompts of 12 tokens, 10 new tokens, k = 3
SMALL_RUN = ["--lm", "katz2.dlm", "--prompts", "2", "--prompt-tokens", "12", "--max-new-tokens", "10", "--k", "3"]


def tiny_demo_models(folder: Path, *, neural: bool = False) -> Path:
    """Writes default/ (3 heads), with ``neural`` also neural_rescorer/, and katz2.dlm into
    ``folder``; returns it (the demo's ``--models``)."""
    torch.manual_seed(0)
    config = BlockwiseConfig(
        vocab_size=4096, n_layer=1, n_head=2, d_model=32, d_ff=64, num_heads=3, head_hidden=32, max_seq_len=128
    )
    tokenizer = SHIPPED / "tokenizer.json"
    BlockwiseLM(config).save_pretrained(folder / "default", tokenizer_path=tokenizer)
    if neural:
        rescorer = BlockwiseConfig(**{**config.to_dict(), "num_heads": 1})
        BlockwiseLM(rescorer).save_pretrained(folder / "neural_rescorer", tokenizer_path=tokenizer)
    shutil.copy(SHIPPED / "katz2.dlm", folder)
    return folder
