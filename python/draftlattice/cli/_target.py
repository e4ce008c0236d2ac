"""The target model of a command: the default model (fetched on first use) or a target folder."""

from __future__ import annotations

from pathlib import Path

TARGET_HELP = (
    "a target folder with model/ (a transformers causal LM with its tokenizer.json) and heads/ "
    "(its DraftHeads) (default: the default model, SmolLM2-135M-Instruct, with its shipped heads; "
    "fetched on first use)"
)


def load_target(folder: Path | None, dtype: str = "float32"):
    """``(model, heads, tokenizer.json path, name)`` in eval mode on the CPU."""
    import torch

    torch_dtype = getattr(torch, dtype)
    if folder is None:
        from ..default_model import load_default

        bundle = load_default(torch_dtype)
        return bundle.model, bundle.heads, bundle.folder / "tokenizer.json", str(bundle.folder)
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    from ..default_model.load import _quiet_transformers
    from ..hf import DraftHeads

    folder = Path(folder)
    for part in ("model", "heads"):
        if not (folder / part / "config.json").is_file():
            raise FileNotFoundError(f"{folder}: not a target folder (no {part}/config.json)")
    tokenizer_path = folder / "model" / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise ValueError(f"{folder / 'model'}: missing tokenizer.json")
    part = folder / "model"
    try:  # damaged weights: one line naming the folder, not the loader's traceback
        with _quiet_transformers():  # no "Loading weights" bar on stderr, as for the default model
            model = AutoModelForCausalLM.from_pretrained(part, dtype=torch_dtype).eval()
        part = folder / "heads"
        heads = DraftHeads.from_pretrained(part, model)
    except SafetensorError as error:
        raise ValueError(f"{part}: damaged weights ({error})") from None
    return model, heads, tokenizer_path, str(folder)
