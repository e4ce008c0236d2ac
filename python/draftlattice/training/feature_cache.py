"""The frozen trunk's final hidden states of a distilled corpus, computed once, read back from disk.

The heads learn from the trunk's last hidden state ``z``; the trunk is frozen, so ``z`` of a
record never changes and costs one trunk forward per epoch when recomputed (on this CPU the
trunk alone runs at about 3,250 tokens/s, so it bounds training). :class:`FeatureCache` runs
the trunk over the corpus once and keeps ``z`` of every position a head learns from: record
``r``'s positions ``prompt_len - 1`` .. ``min(len, max_len) - 1`` (its prompt's last token, where
drafting starts, and its continuation). A folder::

    meta.json      {"format": "draftlattice-features", "version": 1, "model": {...},
                    "corpus": {...}, "max_len", "hidden_size", "dtype": "bfloat16", "rows",
                    "segments": [R1, R2, ...]}
    features.bin   bfloat16 [rows, hidden_size], little-endian, row-major; record after record
    progress.json  {"records": n}: the first n records of the build order are on disk

With ``step`` (a lean step of the model, :class:`draftlattice.lean.LeanLlama`) the trunk that runs
is that step: in a quantized format, the hidden states the heads read when they draft on it (a
batch of records is compute-bound either way: on the 2-core AMD VM the int4 step reads 950
tokens/s, the model's bf16 forward 1,160). The step's format is part of the model's fingerprint.

The build is resumable (``progress.json`` is replaced, atomically, after the rows it counts are
flushed) and shows progress with an ETA. A corpus that grows (more shards distilled after the
cache was built) extends its cache: when the folder holds the features of the corpus' first
``R1`` records, those rows stay (the layout is record after record, so they keep their place),
the file grows, and only the new records run through the trunk. The build order is therefore by
segment (``segments``: cumulative record counts, one per build; a file without it has one), by
length within each. A folder that holds anything else, or the features of
another model or corpus, is never overwritten unless asked (``overwrite=True``); the error says
which fingerprint differs. Size: ``2 * hidden_size`` bytes a row (1.15 KB for d = 576).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..distilled_corpus import DistilledCorpus
from ._progress import RecentRate, duration

logger = logging.getLogger(__name__)

FORMAT = "draftlattice-features"
VERSION = 1
META, DATA, PROGRESS = "meta.json", "features.bin", "progress.json"
ROW_DTYPE = np.dtype("<u2")  # bfloat16 bits; numpy has no bfloat16


def model_fingerprint(model) -> dict:
    """What decides ``z``: the trunk's shape and a hash of (the head of) every trunk weight (not the
    folder's name: the same weights loaded from elsewhere share a cache)."""
    config = model.config
    digest = hashlib.sha256()
    for name, param in model.base_model.named_parameters():
        digest.update(name.encode())
        digest.update(param.detach().reshape(-1)[:4096].float().cpu().numpy().tobytes())
    return {
        "model_type": getattr(config, "model_type", None),
        "hidden_size": int(config.hidden_size),
        "num_hidden_layers": getattr(config, "num_hidden_layers", None),
        "weights_sha256": digest.hexdigest(),
    }


def corpus_fingerprint(corpus: DistilledCorpus, records: int | None = None) -> dict:
    """The size and a hash of the tokens, offsets and prompt lengths of the corpus (of its first
    ``records`` records when given)."""
    n = len(corpus) if records is None else int(records)
    end = int(corpus.offsets[n])
    digest = hashlib.sha256()
    for array in (
        corpus.tokens[:end].astype("<i4"),
        corpus.offsets[: n + 1].astype("<i8"),
        corpus.prompt_lens[:n].astype("<i4"),
    ):
        digest.update(np.ascontiguousarray(array).tobytes())
    return {"records": n, "tokens": end, "sha256": digest.hexdigest()}


class FeatureCache:
    """``z`` of a corpus' learnt positions in a folder (see the module docstring).

    Use :meth:`build` to make (or finish) one and :meth:`rows` to read a batch back.
    """

    def __init__(self, folder: Path, corpus: DistilledCorpus, meta: dict) -> None:
        self.folder, self.corpus, self.meta = folder, corpus, meta
        self.max_len, self.hidden_size = int(meta["max_len"]), int(meta["hidden_size"])
        self.starts, self.offsets = _layout(corpus, self.max_len)
        self.data = np.memmap(
            folder / DATA, dtype=ROW_DTYPE, mode="r", shape=(max(1, int(meta["rows"])), self.hidden_size)
        )

    @classmethod
    def build(
        cls,
        folder: str | os.PathLike[str],
        model,
        corpus: DistilledCorpus,
        *,
        max_len: int = 1024,
        batch_tokens: int = 8192,
        overwrite: bool = False,
        progress: bool | None = None,
        log_every: float = 60.0,
        step=None,
    ) -> FeatureCache:
        """Runs the frozen trunk of ``model`` (bf16 autocast), or its lean ``step``, over ``corpus``
        into ``folder``.

        Continues an interrupted build; returns at once when the folder is complete; extends the
        features of a prefix of ``corpus`` (its first records) to the whole. Raises ``ValueError``
        when the folder holds other files or features of another model, corpus or ``max_len``
        (unless ``overwrite``: then only this format's own files are replaced).
        """
        folder = Path(folder)
        fingerprint = model_fingerprint(model)
        if step is not None:
            if not step.fits(model):
                raise ValueError("step was built for another model: build it with LeanLlama(model, weights)")
            fingerprint["step"] = f"lean {step.weights}"
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "model": fingerprint,
            "corpus": corpus_fingerprint(corpus),
            "max_len": int(max_len),
            "hidden_size": int(model.config.hidden_size),
            "dtype": "bfloat16",
        }
        starts, offsets = _layout(corpus, max_len)
        meta["rows"] = int(offsets[-1])
        meta["segments"] = [len(corpus)]
        done = _prepare(folder, meta, corpus, overwrite)
        order = _build_order(corpus, max_len, meta["segments"])
        if done < len(order):
            trunk = _lean_trunk(step) if step is not None else _model_trunk(model)
            _fill(folder, trunk, corpus, meta, order, done, starts, offsets, batch_tokens, progress, log_every)
        return cls(folder, corpus, meta)

    @classmethod
    def open(cls, folder: str | os.PathLike[str], corpus: DistilledCorpus, model=None, step=None) -> FeatureCache:
        """A complete cache of ``corpus`` (and ``model``, or its lean ``step``, when given);
        ValueError otherwise."""
        folder = Path(folder)
        meta = _read_meta(folder)
        if meta is None:
            raise ValueError(f"{folder}: no {META} of format {FORMAT!r}; build it with FeatureCache.build")
        expected = {"corpus": corpus_fingerprint(corpus)}
        if model is not None:
            expected["model"] = model_fingerprint(model)
            if step is not None:
                expected["model"]["step"] = f"lean {step.weights}"
        _check_same(folder, meta, expected)
        if _records_done(folder) < len(corpus):
            raise ValueError(f"{folder}: the build is not finished; rerun FeatureCache.build to continue it")
        return cls(folder, corpus, meta)

    def rows(self, records: np.ndarray, width: int) -> Tensor:
        """``z [len(records), width, hidden_size]`` (bf16) of a batch of ``records`` right-padded to
        ``width`` tokens, as :class:`~.batches.RecordBatches` lays it out; positions before a
        record's prompt end (which no head learns from) and padding are zero."""
        out = np.zeros((len(records), width, self.hidden_size), ROW_DTYPE)
        for b, r in enumerate(records):
            lo, hi = int(self.offsets[r]), int(self.offsets[r + 1])
            s = int(self.starts[r])
            out[b, s : s + hi - lo] = self.data[lo:hi]
        return torch.from_numpy(out.view(np.int16)).view(torch.bfloat16)


def _layout(corpus: DistilledCorpus, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Per record, its first kept position and the offsets [R + 1] of its rows in the file."""
    lengths = np.minimum(np.diff(corpus.offsets), max_len)
    starts = np.minimum(np.maximum(corpus.prompt_lens.astype(np.int64) - 1, 0), lengths)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    offsets[1:] = np.cumsum(lengths - starts)
    return starts, offsets


def _build_order(corpus: DistilledCorpus, max_len: int, segments: list[int]) -> np.ndarray:
    """Records in the order the trunk runs over them: segment after segment (one per build of a
    growing corpus), by length within each (similar lengths batch with little padding)."""
    lengths = np.minimum(np.diff(corpus.offsets), max_len)
    parts, lo = [], 0
    for hi in segments:
        parts.append(lo + np.argsort(lengths[lo:hi], kind="stable"))
        lo = hi
    return np.concatenate(parts)


def _segments(meta: dict) -> list[int]:
    return list(meta.get("segments") or [int(meta["corpus"]["records"])])


def _read_meta(folder: Path) -> dict | None:
    path = folder / META
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == FORMAT else None


def _records_done(folder: Path) -> int:
    path = folder / PROGRESS
    return int(json.loads(path.read_text())["records"]) if path.is_file() else 0


def _check_same(folder: Path, meta: dict, expected: dict, hint: str = "") -> None:
    differs = [key for key, value in expected.items() if meta.get(key) != value]
    if differs:
        detail = "; ".join(f"{key}: the folder has {meta.get(key)}, this run {expected[key]}" for key in differs)
        raise ValueError(f"{folder} holds features of another {', '.join(differs)} ({detail}){hint}")


def _prepare(folder: Path, meta: dict, corpus: DistilledCorpus, overwrite: bool) -> int:
    """Makes ``folder`` ready for ``meta``'s features (extending the features of a prefix of
    ``corpus`` in place, or recording the segments of an earlier build in ``meta``); returns how
    many records of the build order are already done."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} is a file, not a feature-cache folder; choose another path")
    old = _read_meta(folder)
    ours = {META, DATA, PROGRESS, DATA + ".tmp", PROGRESS + ".tmp", META + ".tmp"}
    if folder.is_dir() and old is None and any(folder.iterdir()):
        names = sorted(p.name for p in folder.iterdir())[:5]
        raise ValueError(f"{folder} is not empty and holds no feature cache ({names}); choose an empty or new folder")
    if old is not None:
        try:
            others = sorted(p.name for p in folder.iterdir() if p.name not in ours)
            if others:
                raise ValueError(f"{folder} holds files that are not a feature cache's: {others[:5]}")
            if _extends(old, meta, corpus):
                return _extend(folder, old, meta)
            expected = {
                key: meta[key] for key in ("version", "model", "corpus", "max_len", "hidden_size", "dtype", "rows")
            }
            _check_same(folder, old, expected, hint="; pass overwrite=True (--overwrite-features) to rebuild it")
            if _data_bytes(folder) >= meta["rows"] * meta["hidden_size"] * 2:
                meta["segments"] = _segments(old)
                return _records_done(folder)
        except ValueError:
            if not overwrite:
                raise
        for name in ours:  # overwrite asked: only this format's own files go
            (folder / name).unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (DATA + ".tmp")
    np.memmap(tmp, dtype=ROW_DTYPE, mode="w+", shape=(max(1, meta["rows"]), meta["hidden_size"])).flush()
    os.replace(tmp, folder / DATA)
    (folder / PROGRESS).unlink(missing_ok=True)
    _write_meta(folder, meta)
    return 0


def _extends(old: dict, meta: dict, corpus: DistilledCorpus) -> bool:
    """Whether ``old`` holds (some of) the features of a proper prefix of ``corpus`` with the
    same model, format and ``max_len``."""
    same = ("version", "model", "max_len", "hidden_size", "dtype")
    if any(old.get(key) != meta[key] for key in same):
        return False
    records = int(old.get("corpus", {}).get("records", -1))
    return 0 < records < len(corpus) and old["corpus"] == corpus_fingerprint(corpus, records)


def _extend(folder: Path, old: dict, meta: dict) -> int:
    """Grows the data file to ``meta``'s rows (the old rows keep their place: zeros follow), then
    replaces the meta; a crash between the two leaves the old cache whole, and the next build
    extends it again."""
    if _data_bytes(folder) < old["rows"] * old["hidden_size"] * 2:
        raise ValueError(f"{folder}/{DATA} is shorter than its {META} says; pass overwrite=True to rebuild it")
    meta["segments"] = _segments(old) + [meta["corpus"]["records"]]
    logger.info(
        "extending the trunk features in %s from %d to %d records (the first %d are kept)",
        folder,
        old["corpus"]["records"],
        meta["corpus"]["records"],
        old["corpus"]["records"],
    )
    with open(folder / DATA, "r+b") as f:
        f.truncate(max(1, meta["rows"]) * meta["hidden_size"] * 2)
    _write_meta(folder, meta)
    return _records_done(folder)


def _data_bytes(folder: Path) -> int:
    path = folder / DATA
    return path.stat().st_size if path.is_file() else -1


def _write_meta(folder: Path, meta: dict) -> None:
    tmp = folder / (META + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, folder / META)


def _model_trunk(model):
    """``tokens [B, T] -> z [B, T, d]`` by the model's own forward (bf16 autocast)."""
    device = next(model.parameters()).device
    model.eval()

    def trunk(tokens: Tensor) -> Tensor:
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
            return model.base_model(input_ids=tokens.to(device)).last_hidden_state

    return trunk


def _lean_trunk(step):
    """``tokens [B, T] -> z [B, T, d]`` by a lean step (a fresh cache per batch; right padding
    needs no mask: causal attention never reads it)."""

    def trunk(tokens: Tensor) -> Tensor:
        B, T = tokens.shape
        positions = torch.arange(T, device=step.device).unsqueeze(0).expand(B, T)
        with torch.inference_mode(), step.session():
            return step.hidden(tokens.to(step.device), positions, None, step.new_cache(B, T))

    return trunk


def _fill(folder, trunk, corpus, meta, order, done, starts, offsets, batch_tokens, progress, log_every) -> None:
    from tqdm.auto import tqdm

    lengths = np.minimum(np.diff(corpus.offsets), meta["max_len"])
    data = np.memmap(folder / DATA, dtype=ROW_DTYPE, mode="r+", shape=(max(1, meta["rows"]), meta["hidden_size"]))
    total_tokens = int(lengths.sum())
    left_tokens = int(lengths[order[done:]].sum())
    bar = tqdm(
        total=total_tokens,
        initial=total_tokens - left_tokens,
        unit="tok",
        desc="trunk features",
        disable=not (progress if progress is not None else sys.stderr.isatty()),
    )
    logger.info("trunk features of %d records (%d tokens left) into %s", len(order), left_tokens, folder)
    started = last_log = time.monotonic()
    recent = RecentRate(started)
    tokens_done, position = 0, done
    while position < len(order):
        end, width = position + 1, int(lengths[order[position]])
        while end < len(order) and (end + 1 - position) * max(width, int(lengths[order[end]])) <= batch_tokens:
            width = max(width, int(lengths[order[end]]))
            end += 1
        rows = order[position:end]
        tokens = np.zeros((len(rows), width), np.int64)
        for b, r in enumerate(rows):
            tokens[b, : lengths[r]] = corpus.record(int(r))[: lengths[r]]
        z = trunk(torch.from_numpy(tokens))
        bits = z.to(torch.bfloat16).cpu().view(torch.int16).numpy().view(ROW_DTYPE)
        for b, r in enumerate(rows):
            s = int(starts[r])
            data[offsets[r] : offsets[r + 1]] = bits[b, s : int(lengths[r])]
        data.flush()
        _write_progress(folder, end)
        n = int(lengths[rows].sum())
        tokens_done += n
        position = end
        bar.update(n)
        now = time.monotonic()
        rate = recent.update(now, tokens_done)
        if now - last_log >= log_every or position == len(order):
            last_log = now
            left = left_tokens - tokens_done  # (a disabled bar does not count)
            logger.info(
                "trunk features: %d/%d records, %.0f tokens/s, ETA %s",
                position,
                len(order),
                rate,
                duration(left / rate),
            )
    bar.close()
    del data


def _write_progress(folder: Path, records: int) -> None:
    tmp = folder / (PROGRESS + ".tmp")
    tmp.write_text(json.dumps({"records": int(records)}) + "\n")
    os.replace(tmp, folder / PROGRESS)
