"""Draft heads for a transformers causal LM: heads 2..h of blockwise parallel decoding.

Head ``j`` (``j = 2..h``) predicts token ``t + j`` from the base model's final (normalised)
hidden state ``z`` at position ``t`` (``base_model(...).last_hidden_state``) through a residual
feed-forward block and the model's own output projection::

    logits_j = model.get_output_embeddings()(z + down(gelu(up(z))))

``down`` starts at zero, so a fresh head reproduces the model's next-token distribution (as
Medusa's heads do) and learns its offset in training.

Heads made with ``next_token=True`` also read the embedding of token ``t + 1`` (the model's own
input embedding of the token the target chose at ``t``, known before heads 2..h draft)::

    logits_j = model.get_output_embeddings()(z + down(gelu(up(z) + condition(embed(x[t + 1])))))

On-disk format (a folder, fixed: other tools read it):

* ``config.json``: ``{"format": "draftlattice-draft-heads", "version": 1, "horizon": h,
  "hidden_size": d, "head_hidden": d_ff, "vocab_size": V, "activation": "gelu",
  "base_model_type": ..., "base_model_name": ... or null}``; heads that read the next token are
  ``"version": 2`` with ``"next_token_width": e`` (the width of the model's input embeddings), so
  a version-1 reader refuses them instead of dropping the tensors it does not know. Heads with a
  draft vocabulary (:meth:`DraftHeads.restrict_vocabulary`) are version 2 with
  ``"draft_vocab_size": N``.
* ``model.safetensors``: ``heads.{i}.up.weight`` [d_ff, d], ``heads.{i}.up.bias`` [d_ff],
  ``heads.{i}.down.weight`` [d, d_ff], ``heads.{i}.down.bias`` [d] for ``i = 0..h-2``
  (``heads.{i}`` is head ``i + 2``); version 2 adds ``heads.{i}.condition.weight`` [d_ff, e]
  (next token) and ``draft_vocab`` [N] int64 (the sorted token ids the heads may draft).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .draft_vocab import RestrictedProjection, check_vocabulary
from .residual_head import ResidualHead

logger = logging.getLogger(__name__)

FORMAT = "draftlattice-draft-heads"
VERSION = 1
EXTENDED_VERSION = 2  #: heads that read the next token's embedding, or draft from part of the vocabulary
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"


def output_embeddings(model: nn.Module) -> nn.Module:
    """The model's output projection (``lm_head``); ValueError if it has none."""
    get = getattr(model, "get_output_embeddings", None)
    head = get() if get is not None else None
    if head is None:
        raise ValueError(f"{type(model).__name__} has no output embeddings: pass a *ForCausalLM model")
    return head


def input_embeddings(model: nn.Module) -> nn.Module:
    """The model's input embedding table; ValueError if it has none."""
    get = getattr(model, "get_input_embeddings", None)
    table = get() if get is not None else None
    if table is None or not hasattr(table, "weight"):
        raise ValueError(f"{type(model).__name__} has no input embedding table; heads reading the next token need one")
    return table


def model_facts(model: nn.Module) -> dict[str, Any]:
    """What a set of heads must match: hidden size, vocabulary, model type and name."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "hidden_size"):
        raise ValueError(f"{type(model).__name__} is not a transformers model (no config.hidden_size)")
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"{type(model).__name__} is an encoder-decoder model; draft heads need a decoder-only causal LM"
        )
    return {
        "hidden_size": int(config.hidden_size),
        "vocab_size": int(output_embeddings(model).weight.shape[0]),
        "base_model_type": getattr(config, "model_type", None),
        "base_model_name": getattr(config, "name_or_path", None) or None,
    }


def _short_name(name: str | None) -> str | None:
    # Folders move and hub ids gain a local prefix: names compare by their last path component.
    return None if not name else Path(str(name).rstrip("/\\")).name


class DraftHeads(nn.Module):
    """Heads 2..h of a causal LM (``horizon = h``); see the module docstring.

    Build with :meth:`for_model` or :meth:`from_pretrained`. ``heads(z)`` maps hidden states
    ``z [..., d]`` to the heads' states ``[..., h-1, d]``; :meth:`logits` applies the model's
    output projection. Heads with :attr:`reads_next_token` also take the next token (``x[t + 1]``,
    the target's own choice at ``t``): ``heads(z, next_embeds)``, ``heads.logits(z, model, next_ids)``.
    """

    def __init__(
        self,
        horizon: int,
        hidden_size: int,
        head_hidden: int,
        vocab_size: int,
        base_model_type: str | None = None,
        base_model_name: str | None = None,
        next_token_width: int | None = None,
        draft_vocab_size: int | None = None,
    ) -> None:
        super().__init__()
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 2:
            raise ValueError(f"horizon must be an int >= 2 (head 1 is the model itself), got {horizon!r}")
        sizes = [("hidden_size", hidden_size), ("head_hidden", head_hidden), ("vocab_size", vocab_size)]
        for name, value in (("next_token_width", next_token_width), ("draft_vocab_size", draft_vocab_size)):
            if value is not None:
                sizes.append((name, value))
        for name, value in sizes:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.horizon = horizon
        self.hidden_size = hidden_size
        self.head_hidden = head_hidden
        self.vocab_size = vocab_size
        self.base_model_type = base_model_type
        self.base_model_name = base_model_name
        self.next_token_width = next_token_width
        self.heads = nn.ModuleList(ResidualHead(hidden_size, head_hidden, next_token_width) for _ in range(horizon - 1))
        vocab = None if draft_vocab_size is None else torch.arange(draft_vocab_size, dtype=torch.int64)
        self.register_buffer("draft_vocab", vocab)  # filled by restrict_vocabulary or from_pretrained
        self._restricted = RestrictedProjection()

    def restrict_vocabulary(self, ids) -> DraftHeads:
        """Draft only tokens ``ids`` (e.g. the model's N most frequent output tokens): the heads'
        logits are computed for them alone, -inf elsewhere (see :mod:`.draft_vocab`); ``None``
        lifts the restriction. Returns ``self``."""
        device = next(self.parameters()).device
        vocab = None if ids is None else check_vocabulary(ids, self.vocab_size).to(device)
        self.draft_vocab = vocab
        self._restricted = RestrictedProjection()
        return self

    @property
    def reads_next_token(self) -> bool:
        """Whether the heads also read the embedding of the token after their position."""
        return self.next_token_width is not None

    @property
    def fuses_with_target(self) -> bool:
        """Whether the heads' logits may come out of the target's own output projection in the
        verification forward (plain heads over the whole vocabulary): heads that read the next
        token wait for it, and a draft vocabulary is projected on its own."""
        return not self.reads_next_token and self.draft_vocab is None

    @classmethod
    def for_model(
        cls, model: nn.Module, horizon: int = 4, head_hidden: int | None = None, next_token: bool = False
    ) -> DraftHeads:
        """New heads 2..horizon for ``model``, on its device and dtype.

        Every new head reproduces the model's next-token distribution (zero residual); train
        them with :func:`draftlattice.training.train_heads`. ``head_hidden`` defaults to the model's
        hidden size. ``next_token``: the heads also read the next token's input embedding (more
        accurate; the engine then runs them after choosing that token, one extra output
        projection a step).
        """
        facts = model_facts(model)
        heads = cls(
            horizon,
            facts["hidden_size"],
            head_hidden or facts["hidden_size"],
            facts["vocab_size"],
            facts["base_model_type"],
            facts["base_model_name"],
            int(input_embeddings(model).weight.shape[1]) if next_token else None,
        )
        param = next(output_embeddings(model).parameters())
        return heads.to(device=param.device, dtype=param.dtype)

    def truncated(self, horizon: int) -> DraftHeads:
        """Heads 2..``horizon`` of these (shared weights): shorter drafts from the same training."""
        if isinstance(horizon, bool) or not isinstance(horizon, int) or not 2 <= horizon <= self.horizon:
            raise ValueError(f"horizon must be an int in [2, {self.horizon}], got {horizon!r}")
        if horizon == self.horizon:
            return self
        return self._with_heads(list(self.heads)[: horizon - 1])

    def extended(self, horizon: int) -> DraftHeads:
        """Heads 2..``horizon``: these (shared weights), then new ones that start as the model's
        own next-token law (zero residual, as :meth:`for_model`'s), on the same device and dtype
        and draft vocabulary: a longer horizon trained on from trained heads."""
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < self.horizon:
            raise ValueError(f"horizon must be an int >= {self.horizon} (these heads' own), got {horizon!r}")
        if horizon == self.horizon:
            return self
        param = next(self.parameters())
        width = self.next_token_width
        new = [ResidualHead(self.hidden_size, self.head_hidden, width) for _ in range(horizon - self.horizon)]
        return self._with_heads([*self.heads, *(head.to(device=param.device, dtype=param.dtype) for head in new)])

    def widened(self, head_hidden: int) -> DraftHeads:
        """These heads with ``head_hidden`` >= their own hidden units each, computing the same
        drafts (:meth:`ResidualHead.widened`: the new units start silent): more capacity trained
        on from trained heads. A copy; the draft vocabulary is kept."""
        if isinstance(head_hidden, bool) or not isinstance(head_hidden, int) or head_hidden < self.head_hidden:
            raise ValueError(
                f"head_hidden must be an int >= {self.head_hidden} (these heads' own), got {head_hidden!r}"
            )
        return self._with_heads([head.widened(head_hidden) for head in self.heads], head_hidden)

    def _with_heads(self, heads: list[nn.Module], head_hidden: int | None = None) -> DraftHeads:
        """Heads of this configuration (but ``head_hidden`` when given) and draft vocabulary made
        of the modules ``heads`` (shared)."""
        out = DraftHeads(
            len(heads) + 1,
            self.hidden_size,
            head_hidden or self.head_hidden,
            self.vocab_size,
            self.base_model_type,
            self.base_model_name,
            self.next_token_width,
        )
        out.heads = nn.ModuleList(heads)
        out.draft_vocab = self.draft_vocab
        return out.train(self.training)

    def forward(self, z: torch.Tensor, next_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """States of heads 2..h, ``[..., h-1, d]`` from ``z [..., d]`` (and, for heads that read
        the next token, its embedding ``next_embeds [..., e]``)."""
        return torch.stack([head(z, next_embeds) for head in self.heads], dim=-2)

    def next_embeds(self, model: nn.Module, next_ids: torch.Tensor | None) -> torch.Tensor | None:
        """The input embeddings of ``next_ids`` these heads read (None for heads that read none)."""
        if not self.reads_next_token:
            return None
        if next_ids is None:
            raise ValueError("these draft heads read the next token: pass next_ids (the target's token at t + 1)")
        return input_embeddings(model)(next_ids)

    def logits(self, z: torch.Tensor, model: nn.Module, next_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of heads 2..h, ``[..., h-1, V]``, through ``model``'s output projection;
        ``next_ids [...]``: token t + 1 at each position (needed by heads that read it). Tokens
        outside a draft vocabulary get -inf."""
        states = self(z, self.next_embeds(model, next_ids))
        if self.draft_vocab is None:
            return output_embeddings(model)(states)
        return self._restricted(states, output_embeddings(model), self.draft_vocab)

    def config_dict(self) -> dict[str, Any]:
        config = {
            "format": FORMAT,
            "version": VERSION,
            "horizon": self.horizon,
            "hidden_size": self.hidden_size,
            "head_hidden": self.head_hidden,
            "vocab_size": self.vocab_size,
            "activation": "gelu",
            "base_model_type": self.base_model_type,
            "base_model_name": self.base_model_name,
        }
        if self.reads_next_token:
            config["next_token_width"] = self.next_token_width
        if self.draft_vocab is not None:
            config["draft_vocab_size"] = int(self.draft_vocab.numel())
        if "next_token_width" in config or "draft_vocab_size" in config:
            config["version"] = EXTENDED_VERSION  # version-1 readers refuse what they cannot read
        return config

    def save_pretrained(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory`` (created)."""
        from safetensors.torch import save_file

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {name: t.detach().contiguous().cpu() for name, t in self.state_dict().items()}
        save_file(tensors, str(out / WEIGHTS_NAME), metadata={"format": "pt"})
        (out / CONFIG_NAME).write_text(json.dumps(self.config_dict(), indent=2) + "\n")
        logger.info("saved %d draft heads to %s", self.horizon - 1, out)
        return out

    @classmethod
    def from_pretrained(
        cls, directory: str | os.PathLike[str], model: nn.Module, strict_name: bool = True
    ) -> DraftHeads:
        """Load heads saved by :meth:`save_pretrained` for ``model`` (on its device and dtype).

        The heads must fit the model: same hidden size, vocabulary size and model type, always
        checked. With ``strict_name`` (default) the recorded base model name must also match
        ``model.config.name_or_path`` when both are known (compared by their last path
        component, so a moved folder or a hub id vs. its local copy still match); pass
        ``strict_name=False`` to use heads trained on another checkpoint of the same shape
        (e.g. a fine-tune). Raises ``ValueError`` naming every mismatch, ``FileNotFoundError``
        for a missing file.
        """
        from safetensors.torch import load_file

        folder = Path(directory)
        config_path, weights_path = folder / CONFIG_NAME, folder / WEIGHTS_NAME
        for path in (config_path, weights_path):
            if not path.is_file():
                raise FileNotFoundError(f"draft heads: {path} not found (expected a folder written by save_pretrained)")
        try:
            config = json.loads(config_path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{config_path}: not valid JSON ({error})") from None
        if config.get("format") != FORMAT or config.get("version") not in (VERSION, EXTENDED_VERSION):
            raise ValueError(
                f"{config_path}: not draftlattice draft heads (format {config.get('format')!r}, "
                f"version {config.get('version')!r}; expected {FORMAT!r} version {VERSION} or {EXTENDED_VERSION})"
            )
        extensions = {}
        for key in ("next_token_width", "draft_vocab_size"):
            value = config.get(key) if config["version"] == EXTENDED_VERSION else None
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{config_path}: {key} must be a positive int, got {value!r}")
            extensions[key] = value
        width = extensions["next_token_width"]
        if config.get("activation", "gelu") != "gelu":
            raise ValueError(f"{config_path}: activation {config['activation']!r} is not supported (only gelu)")
        facts = model_facts(model)
        problems = [
            f"{key} {config.get(key)} != the model's {facts[key]}"
            for key in ("hidden_size", "vocab_size")
            if config.get(key) != facts[key]
        ]
        if (
            config.get("base_model_type")
            and facts["base_model_type"]
            and config["base_model_type"] != facts["base_model_type"]
        ):
            problems.append(f"model type {config['base_model_type']!r} != the model's {facts['base_model_type']!r}")
        if width is not None and width != int(input_embeddings(model).weight.shape[1]):
            problems.append(
                f"next_token_width {width} != the model's input embedding width "
                f"{int(input_embeddings(model).weight.shape[1])}"
            )
        saved_name, name = _short_name(config.get("base_model_name")), _short_name(facts["base_model_name"])
        if strict_name and saved_name and name and saved_name != name:
            problems.append(
                f"trained for model {config['base_model_name']!r}, not {facts['base_model_name']!r} "
                f"(pass strict_name=False if it is a checkpoint of the same model)"
            )
        if problems:
            raise ValueError(f"draft heads in {folder} do not fit this model: " + "; ".join(problems))
        heads = cls(
            int(config["horizon"]),
            int(config["hidden_size"]),
            int(config["head_hidden"]),
            int(config["vocab_size"]),
            config.get("base_model_type"),
            config.get("base_model_name"),
            width,
            extensions["draft_vocab_size"],
        )
        state = load_file(str(weights_path))
        expected = heads.state_dict()
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        if missing or unexpected:
            raise ValueError(
                f"{weights_path}: tensors do not match config.json (missing {missing[:4]}, unexpected {unexpected[:4]})"
            )
        for key, tensor in state.items():
            if tuple(tensor.shape) != tuple(expected[key].shape):
                raise ValueError(
                    f"{weights_path}: {key} has shape {list(tensor.shape)}, expected {list(expected[key].shape)}"
                )
        heads.load_state_dict(state)
        if heads.draft_vocab is not None:
            try:
                heads.restrict_vocabulary(state["draft_vocab"])
            except ValueError as error:
                raise ValueError(f"{weights_path}: {error}") from None
        param = next(output_embeddings(model).parameters())
        return heads.to(device=param.device, dtype=param.dtype)

    def extra_repr(self) -> str:
        extra = f", next_token_width={self.next_token_width}" if self.reads_next_token else ""
        return f"horizon={self.horizon}, hidden_size={self.hidden_size}, head_hidden={self.head_hidden}{extra}"
