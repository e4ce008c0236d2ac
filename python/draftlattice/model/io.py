"""Saving and loading :class:`BlockwiseLM` directories: config.json, model.safetensors, tokenizer.json.

Weights may be stored in fp16 to halve the shipped size; they are loaded in the requested dtype
(fp32 by default). The tied output projection is stored once (as the embedding).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from .blockwise import BlockwiseLM
from .config import BlockwiseConfig

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
TOKENIZER_NAME = "tokenizer.json"


def save_model(model: BlockwiseLM, directory, tokenizer_path=None, storage_dtype=torch.float16) -> None:
    """Write ``model`` to ``directory`` (created); copy ``tokenizer_path`` as tokenizer.json."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.config.save(directory / CONFIG_NAME)
    tensors = {name: t.detach().to("cpu", storage_dtype).contiguous() for name, t in model.state_dict().items()}
    save_file(tensors, str(directory / WEIGHTS_NAME), metadata={"format": "pt"})
    if tokenizer_path is not None and Path(tokenizer_path).resolve() != (directory / TOKENIZER_NAME).resolve():
        shutil.copyfile(tokenizer_path, directory / TOKENIZER_NAME)


def load_model(directory, device="cpu", dtype=torch.float32) -> BlockwiseLM:
    """Load a model directory; ``ValueError`` if files are missing or do not match the config."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        if not (directory / name).is_file():
            raise ValueError(f"{directory}: missing {name}")
    config = BlockwiseConfig.load(directory / CONFIG_NAME)
    try:
        tensors = load_file(str(directory / WEIGHTS_NAME))
    except (SafetensorError, OSError) as error:
        raise ValueError(f"{directory / WEIGHTS_NAME}: cannot read ({error})") from None
    model = BlockwiseLM(config)
    expected = model.state_dict()
    missing, unexpected = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{directory}: weights do not match config (missing {missing}, unexpected {unexpected})")
    for name, tensor in tensors.items():
        if tensor.shape != expected[name].shape:
            raise ValueError(f"{directory}: {name} has shape {tuple(tensor.shape)}, config wants "
                             f"{tuple(expected[name].shape)}")
    model.load_state_dict({k: v.to(torch.float32) for k, v in tensors.items()})
    return model.to(device=device, dtype=dtype).eval()


def tokenizer_file(directory) -> Path:
    """Path of the model directory's tokenizer.json (``ValueError`` if absent)."""
    path = Path(directory) / TOKENIZER_NAME
    if not path.is_file():
        raise ValueError(f"{directory}: missing {TOKENIZER_NAME}")
    return path
