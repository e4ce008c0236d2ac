"""The files of a model directory: config.json, model.safetensors, tokenizer.json.

Weights may be stored in fp16 to halve the shipped size; they are read back as fp32 (the model
converts them to the requested dtype). The tied output projection is stored once (as the
embedding). ``BlockwiseLM.from_pretrained`` / ``save_pretrained`` use these functions; this module
does not know the model class, so the dependency runs one way (blockwise -> io).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from .config import BlockwiseConfig

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
TOKENIZER_NAME = "tokenizer.json"


def save_model(model: torch.nn.Module, directory, tokenizer_path=None, storage_dtype=torch.float16) -> None:
    """Write ``model`` (with ``.config`` and weights) to ``directory`` (created); copy
    ``tokenizer_path`` as tokenizer.json."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.config.save(directory / CONFIG_NAME)
    tensors = {name: t.detach().to("cpu", storage_dtype).contiguous() for name, t in model.state_dict().items()}
    save_file(tensors, str(directory / WEIGHTS_NAME), metadata={"format": "pt"})
    if tokenizer_path is not None and Path(tokenizer_path).resolve() != (directory / TOKENIZER_NAME).resolve():
        shutil.copyfile(tokenizer_path, directory / TOKENIZER_NAME)


def read_config(directory) -> BlockwiseConfig:
    """The directory's config.json; ``ValueError`` if the config or the weights file is missing."""
    directory = Path(directory)
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        if not (directory / name).is_file():
            raise ValueError(f"{directory}: missing {name}")
    return BlockwiseConfig.load(directory / CONFIG_NAME)


def read_weights(directory, expected: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The directory's weights as fp32, checked against ``expected`` (a fresh model's state dict):
    ``ValueError`` naming missing, unexpected or mis-shaped tensors."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    try:
        tensors = load_file(str(directory / WEIGHTS_NAME))
    except (SafetensorError, OSError) as error:
        raise ValueError(f"{directory / WEIGHTS_NAME}: cannot read ({error})") from None
    missing, unexpected = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{directory}: weights do not match config (missing {missing}, unexpected {unexpected})")
    for name, tensor in tensors.items():
        if tensor.shape != expected[name].shape:
            raise ValueError(
                f"{directory}: {name} has shape {tuple(tensor.shape)}, config wants {tuple(expected[name].shape)}"
            )
    return {name: tensor.to(torch.float32) for name, tensor in tensors.items()}


def tokenizer_file(directory) -> Path:
    """Path of the model directory's tokenizer.json (``ValueError`` if absent)."""
    path = Path(directory) / TOKENIZER_NAME
    if not path.is_file():
        raise ValueError(f"{directory}: missing {TOKENIZER_NAME}")
    return path
