"""Self-distillation corpora: the model's own answers to many prompts, saved as token ids.

:func:`distill` runs the model's ``generate()`` over prompts in large left-padded batches
(greedy, or sampled with a temperature) and writes the prompts with their continuations as
shards of a :class:`~draftlattice.distilled_corpus.DistilledCorpus` folder::

    meta.json            {"format": "draftlattice-distilled", "version": 1, "model", "mode", ...}
    shard-00000.npz      tokens int32 [N] (records back to back), offsets int64 [R + 1],
                         prompt_lens int32 [R] (a record's first prompt_lens tokens are its prompt)

Shards are written under a temporary name and renamed; a rerun skips the shards already there,
so an interrupted run resumes where it stopped. Progress (records, tokens/s, ETA) is logged.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..distilled_corpus import FORMAT, META, VERSION, write_shard
from ..lean.greedy import greedy_batch
from ._progress import RecentRate
from .distillation_prompts import Prompt, encode_prompt

logger = logging.getLogger(__name__)


def distill(
    model,
    tokenizer,
    prompts: Sequence[Prompt],
    output_dir: str | os.PathLike[str],
    *,
    batch_size: int = 64,
    max_new_tokens: int = 256,
    shard_size: int = 1024,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_prompt_tokens: int = 384,
    seed: int = 0,
    deadline: float | None = None,
    step=None,
) -> Path:
    """Generate the model's continuations of ``prompts`` into ``output_dir`` (resumable).

    ``temperature = 0`` is greedy decoding; otherwise sampling with ``temperature`` and
    ``top_p`` (top-k off), seeded per shard. Prompts longer than ``max_prompt_tokens`` are cut
    to their last tokens (chat prompts keep their template's end). Generation stops at the
    model's EOS; the EOS is kept as the record's last token. ``deadline`` (a
    ``time.monotonic()`` value) stops after the shard that passes it; a rerun continues.
    ``step``: a :class:`~draftlattice.lean.LeanLlama` of ``model`` that decodes instead of
    ``generate()`` (greedy only; its weight format's own answers, several times faster on a CPU).
    """
    for name, value in (("batch_size", batch_size), ("max_new_tokens", max_new_tokens), ("shard_size", shard_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if step is not None and temperature != 0:
        raise ValueError("a lean step distills greedy answers only: temperature must be 0")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    mode = "greedy" if temperature == 0 else "sampled"
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "model": getattr(model.config, "name_or_path", None),
        "mode": mode,
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": max_new_tokens,
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
    }
    if step is not None:
        meta["step"] = f"lean {step.weights}"
    meta_path = out / META
    if meta_path.is_file():
        old = json.loads(meta_path.read_text())
        keys = (set(meta) | set(old)) - {"dtype"}  # a "step" in one of them only is a difference
        differs = {k: (old.get(k), meta.get(k)) for k in keys if old.get(k) != meta.get(k)}
        if differs:
            raise ValueError(f"{out} holds a corpus made with other settings {differs}; use another folder")
    else:
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    eos = _eos_ids(model)
    pad = eos[0] if eos else 0
    n_shards = (len(prompts) + shard_size - 1) // shard_size
    started, done_tokens, written = time.monotonic(), 0, 0
    shards_rate, tokens_rate = RecentRate(started), RecentRate(started)
    for shard in range(n_shards):
        path = out / f"shard-{shard:05d}.npz"
        if path.is_file():
            continue
        if deadline is not None and time.monotonic() > deadline:
            logger.info("distill: time budget spent after %d generated tokens; rerun to continue", done_tokens)
            break
        chunk = prompts[shard * shard_size : (shard + 1) * shard_size]
        encoded = [encode_prompt(tokenizer, p)[-max_prompt_tokens:] for p in chunk]
        generator_seed = seed * 100_003 + shard
        records = _generate_records(
            model, encoded, batch_size, max_new_tokens, temperature, top_p, eos, pad, generator_seed, step
        )
        write_shard(path, records)
        done_tokens += sum(len(r) - p for r, p in records)
        written += 1
        now = time.monotonic()
        # Shards already on disk are skipped, so only this run's shards time the rest, at their
        # recent pace (the machine may be shared: see RecentRate).
        remaining = sum(1 for i in range(shard + 1, n_shards) if not (out / f"shard-{i:05d}.npz").is_file())
        shards_per_s = shards_rate.update(now, written)
        logger.info(
            "distill shard %d/%d: %d generated tokens so far, %.0f tokens/s, ETA %.0f s",
            shard + 1,
            n_shards,
            done_tokens,
            tokens_rate.update(now, done_tokens),
            remaining / max(shards_per_s, 1e-9),
        )
    return out


def _eos_ids(model) -> list[int]:
    eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = getattr(model.config, "eos_token_id", None)
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]


@torch.inference_mode()
def _generate_records(model, encoded, batch_size, max_new_tokens, temperature, top_p, eos, pad, seed, step=None):
    device = next(model.parameters()).device
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))  # similar lengths share a batch
    records: list[tuple[np.ndarray, int] | None] = [None] * len(encoded)
    torch.manual_seed(seed)
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        width = max(len(encoded[i]) for i in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, i in enumerate(rows):
            ids[r, width - len(encoded[i]) :] = torch.tensor(encoded[i])
            mask[r, width - len(encoded[i]) :] = 1
        sampling = (
            {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
            if temperature > 0
            else {"do_sample": False}
        )
        if step is not None:
            out = greedy_batch(step, ids, mask, max_new_tokens, eos, pad)
        else:
            out = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                max_new_tokens=max_new_tokens,
                eos_token_id=eos or None,
                pad_token_id=pad,
                **sampling,
            ).cpu()
        for r, i in enumerate(rows):
            new = out[r, width:].tolist()
            for n, token in enumerate(new):
                if token in eos:
                    new = new[: n + 1]
                    break
            records[i] = (np.asarray(encoded[i] + new, dtype=np.int32), len(encoded[i]))
    return records
