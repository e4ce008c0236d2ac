"""The target model of a command: the default model (fetched on first use) or a target folder."""

from __future__ import annotations

from pathlib import Path

TARGET_HELP = (
    "a target folder with model/ (a transformers causal LM with its tokenizer.json) and heads/ "
    "(its DraftHeads) (default: the default model, SmolLM2-135M-Instruct, with its shipped heads; "
    "fetched on first use)"
)


def check_target(folder: Path | None) -> None:
    """The checks of :func:`load_target` that need no loading: run them with the other arguments'.

    A target folder must hold ``model/config.json``, ``model/tokenizer.json`` and
    ``heads/config.json``; the default model's shipped heads and LM must be there (it is fetched
    later, by :func:`load_target`).
    """
    if folder is None:
        from ..default_model.load import artifacts_dir

        artifacts_dir()
        return
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such target folder")
    for part in ("model", "heads"):
        if not (folder / part / "config.json").is_file():
            raise FileNotFoundError(f"{folder}: not a target folder (no {part}/config.json)")
    if not (folder / "model" / "tokenizer.json").is_file():
        raise ValueError(f"{folder / 'model'}: missing tokenizer.json")


def load_target(folder: Path | None, dtype: str = "float32"):
    """``(model, heads, tokenizer.json path, name)`` in eval mode on the CPU (the default model
    fetched first if it is not in the cache, with a progress line on a terminal)."""
    import torch

    check_target(folder)
    torch_dtype = getattr(torch, dtype)
    if folder is None:
        from ..default_model import load_default
        from ._fetch_line import progress_line

        with progress_line() as line:
            bundle = load_default(torch_dtype, progress=line)
        return bundle.model, bundle.heads, bundle.folder / "tokenizer.json", str(bundle.folder)
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    from ..default_model.progress import quiet_bars
    from ..hf import DraftHeads

    folder = Path(folder)
    tokenizer_path = folder / "model" / "tokenizer.json"
    part = folder / "model"
    try:  # damaged weights: one line naming the folder, not the loader's traceback
        with quiet_bars():  # no "Loading weights" bar on stderr, as for the default model
            model = AutoModelForCausalLM.from_pretrained(part, dtype=torch_dtype).eval()
        part = folder / "heads"
        heads = DraftHeads.from_pretrained(part, model)
    except SafetensorError as error:
        raise ValueError(f"{part}: damaged weights ({error})") from None
    return model, heads, tokenizer_path, str(folder)
