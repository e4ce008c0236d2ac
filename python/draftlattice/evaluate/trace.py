"""Decoding traces: everything greedy blockwise decoding needs from the target, recorded once.

With greedy verification the decoded text is the target's greedy decode ``y``. At decode position
t (the forward whose last input is the prompt's last token for t = 0, else ``y[t-1]``) head j
(1-based) predicts ``y[t + j - 1]``; a trace stores, for every t, each head's top-K token ids and
natural-log probabilities (log-softmax over the full vocabulary, best first, ties by lower id:
the order of :class:`draftlattice.Lattice`) and each head's full-vocabulary entropy (nats). Any
drafter that uses only these and the committed text can then be replayed exactly
(:mod:`draftlattice.evaluate.replay`).

File format (version 1), little-endian::

    magic      8 bytes  b"DLTRACE\\0"
    version    uint32   1
    header_len uint32   length of the header in bytes
    header     JSON (utf-8): {"num_heads": h, "top_k": K, "vocab_size": V,
               "logprob_dtype": "float32"|"float16", "prompt_lengths": [...],
               "num_tokens": [...], "meta": {...}}
    payload    the arrays below, concatenated over prompts in order, raw:
               prompt ids int32 [sum P]; greedy tokens int32 [sum T];
               topk ids int32 [sum T, h, K]; topk logprobs float32|float16 [sum T, h, K];
               entropy float32 [sum T, h]
    sha256     32 bytes over everything before it

Every size is checked against the header; a wrong magic, version, size or checksum raises
:class:`draftlattice.FormatError`. float32 log-probabilities keep replay bit-exact with live
decoding; float16 halves the file at the cost of possible rank ties.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field

import numpy as np

from .._core import FormatError
from ..filekinds import describe

MAGIC = b"DLTRACE\0"
VERSION = 1
_LOGPROB_DTYPES = {"float32": np.float32, "float16": np.float16}


@dataclass
class Trace:
    """A recorded greedy decode of N prompts by a model with h heads.

    Attributes:
        prompts: N int32 arrays [P_i], the prompts' token ids.
        tokens: N int32 arrays [T_i], the greedy continuation y.
        topk_ids: N int32 arrays [T_i, h, K]; ``topk_ids[i][t, j]`` = head j+1's top-K at t.
        topk_logprobs: N float32 arrays [T_i, h, K], natural log, best first.
        entropy: N float32 arrays [T_i, h], each head's entropy in nats (full vocabulary).
        vocab_size: V.
        meta: free-form JSON-able description (model, tokenizer hash, data set, ...).
    """

    prompts: list[np.ndarray]
    tokens: list[np.ndarray]
    topk_ids: list[np.ndarray]
    topk_logprobs: list[np.ndarray]
    entropy: list[np.ndarray]
    vocab_size: int
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def num_heads(self) -> int:
        return int(self.topk_ids[0].shape[1]) if self.topk_ids else 0

    @property
    def top_k(self) -> int:
        return int(self.topk_ids[0].shape[2]) if self.topk_ids else 0

    @property
    def num_positions(self) -> int:
        return int(sum(len(t) for t in self.tokens))

    def __len__(self) -> int:
        return len(self.tokens)

    def validate(self) -> None:
        """ValueError naming the first inconsistency (shapes, dtypes, ranges, greedy tokens)."""
        n = len(self.prompts)
        lists = (self.tokens, self.topk_ids, self.topk_logprobs, self.entropy)
        if any(len(x) != n for x in lists):
            raise ValueError(f"trace lists have different lengths: {[n] + [len(x) for x in lists]}")
        if n == 0:
            raise ValueError("a trace needs at least one prompt")
        h, k = self.topk_ids[0].shape[1:] if self.topk_ids[0].ndim == 3 else (0, 0)
        if h < 1 or k < 1:
            raise ValueError(f"topk_ids must be [T, h, K] with h, K >= 1, got {self.topk_ids[0].shape}")
        for i in range(n):
            t = len(self.tokens[i])
            if len(self.prompts[i]) < 1 or t < 1:
                raise ValueError(f"prompt {i}: empty prompt or continuation")
            if self.topk_ids[i].shape != (t, h, k) or self.topk_logprobs[i].shape != (t, h, k):
                raise ValueError(
                    f"prompt {i}: top-K arrays {self.topk_ids[i].shape} / "
                    f"{self.topk_logprobs[i].shape}, expected {(t, h, k)}"
                )
            if self.entropy[i].shape != (t, h):
                raise ValueError(f"prompt {i}: entropy {self.entropy[i].shape}, expected {(t, h)}")
            for name, arr in (("prompt", self.prompts[i]), ("tokens", self.tokens[i]), ("topk_ids", self.topk_ids[i])):
                if arr.size and (arr.min() < 0 or arr.max() >= self.vocab_size):
                    raise ValueError(f"prompt {i}: {name} ids outside [0, {self.vocab_size})")
            if not np.array_equal(self.topk_ids[i][:, 0, 0], self.tokens[i]):
                raise ValueError(
                    f"prompt {i}: greedy tokens differ from head 1's top-1 (a trace must record the greedy decode)"
                )


def save_trace(trace: Trace, path: str | os.PathLike, logprob_dtype: str = "float32") -> None:
    """Writes ``trace`` in the format above (atomically: temp file then rename)."""
    if logprob_dtype not in _LOGPROB_DTYPES:
        raise ValueError(f"logprob_dtype must be one of {sorted(_LOGPROB_DTYPES)}, got {logprob_dtype!r}")
    trace.validate()
    header = {
        "num_heads": trace.num_heads,
        "top_k": trace.top_k,
        "vocab_size": int(trace.vocab_size),
        "logprob_dtype": logprob_dtype,
        "prompt_lengths": [int(len(p)) for p in trace.prompts],
        "num_tokens": [int(len(t)) for t in trace.tokens],
        "meta": trace.meta,
    }
    try:
        head = json.dumps(header, sort_keys=True, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as error:  # UnicodeEncodeError (lone surrogates) is a ValueError
        raise ValueError(f"trace meta must be JSON with finite numbers and valid text: {error}") from None
    parts = [MAGIC, struct.pack("<II", VERSION, len(head)), head]
    lp = _LOGPROB_DTYPES[logprob_dtype]
    for arrays, dtype in (
        (trace.prompts, "<i4"),
        (trace.tokens, "<i4"),
        (trace.topk_ids, "<i4"),
        (trace.topk_logprobs, np.dtype(lp).newbyteorder("<")),
        (trace.entropy, "<f4"),
    ):
        parts.append(np.concatenate([np.asarray(a).reshape(-1) for a in arrays]).astype(dtype).tobytes())
    body = b"".join(parts)
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "wb") as out:
        out.write(body)
        out.write(hashlib.sha256(body).digest())
    os.replace(tmp, path)


def load_trace(path: str | os.PathLike) -> Trace:
    """Reads a trace file; FormatError on any damage (names the file and the problem).

    Everything is checked before anything is allocated from the header's numbers: the header must
    fit in the file, be strict JSON (no NaN/Infinity, nesting bounded) with integer sizes, and the
    sizes it claims must add up to exactly the payload present.
    """
    name = os.fspath(path)
    with open(name, "rb") as f:
        data = f.read()
    fixed = len(MAGIC) + 8
    if data[: len(MAGIC)] != MAGIC:
        raise FormatError(f"{name}: not a draftlattice trace (is {describe(name)})")
    if len(data) < fixed + 32:
        raise FormatError(f"{name}: truncated trace ({len(data)} bytes)")
    version, header_len = struct.unpack_from("<II", data, len(MAGIC))
    if version != VERSION:
        raise FormatError(f"{name}: trace format version {version}, this reader supports {VERSION}")
    if header_len > len(data) - fixed - 32:
        raise FormatError(f"{name}: header claims {header_len} bytes, the file holds {len(data) - fixed - 32}")
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise FormatError(f"{name}: checksum mismatch (truncated or corrupted trace)")
    try:
        header = _parse_header(body[fixed : fixed + header_len])
        h, k, vocab = (_count(header, key) for key in ("num_heads", "top_k", "vocab_size"))
        lp_dtype = _LOGPROB_DTYPES[header["logprob_dtype"]]
        plens, tlens = _counts(header, "prompt_lengths"), _counts(header, "num_tokens")
        meta = header.get("meta", {})
        if not isinstance(meta, dict):
            raise TypeError(f"meta is {type(meta).__name__}, expected an object")
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise FormatError(f"{name}: malformed trace header ({_short(error)})") from None
    if vocab > _MAX_VOCAB or len(plens) != len(tlens) or not plens:
        raise FormatError(
            f"{name}: inconsistent header sizes (h={h}, K={k}, V={vocab}, "
            f"{len(plens)} prompt lengths, {len(tlens)} token counts)"
        )
    sp, st = sum(plens), sum(tlens)
    lp_size = np.dtype(lp_dtype).itemsize
    expected = 4 * sp + 4 * st + 4 * st * h * k + lp_size * st * h * k + 4 * st * h
    payload = body[fixed + header_len :]
    if len(payload) != expected:  # Python ints: exact for any claimed size, nothing allocated yet
        implied = str(expected) if expected < 2**63 else "more than any file holds"
        raise FormatError(f"{name}: payload is {len(payload)} bytes, header implies {implied}")
    offset = 0

    def take(count: int, dtype) -> np.ndarray:
        nonlocal offset
        dt = np.dtype(dtype).newbyteorder("<")
        arr = np.frombuffer(payload, dtype=dt, count=count, offset=offset)
        offset += count * dt.itemsize
        return arr.astype(dt.newbyteorder("="))

    prompts, tokens = take(sp, np.int32), take(st, np.int32)
    ids = take(st * h * k, np.int32).reshape(st, h, k)
    logprobs = take(st * h * k, lp_dtype).astype(np.float32).reshape(st, h, k)
    entropy = take(st * h, np.float32).reshape(st, h)
    if np.isnan(logprobs).any() or np.isnan(entropy).any():
        raise FormatError(f"{name}: NaN in the recorded log-probabilities or entropies")
    pcut, tcut = np.cumsum(plens)[:-1], np.cumsum(tlens)[:-1]
    try:
        return Trace(
            np.split(prompts, pcut),
            np.split(tokens, tcut),
            np.split(ids, tcut),
            np.split(logprobs, tcut),
            np.split(entropy, tcut),
            vocab,
            meta,
        )
    except ValueError as error:
        raise FormatError(f"{name}: invalid trace contents ({error})") from None


# Token ids are int32 on disk.
_MAX_VOCAB = 2**31 - 1
# Deeper JSON than this is not a header this writer produced (and json's recursion would fail).
_MAX_DEPTH = 64


def _reject_constant(text: str):
    raise ValueError(f"non-finite number {text} in JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not np.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _parse_header(raw: bytes) -> dict:
    """Strict JSON: UTF-8 (no lone surrogates), finite numbers, bounded nesting, an object."""
    text = raw.decode("utf-8")  # UnicodeDecodeError is a ValueError
    depth = 0
    for char in text:  # brackets inside strings only over-count, which errs on the safe side
        depth += (char in "[{") - (char in "]}")
        if depth > _MAX_DEPTH:
            raise ValueError(f"JSON nested deeper than {_MAX_DEPTH}")
    header = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    if not isinstance(header, dict):
        raise TypeError(f"header is {type(header).__name__}, expected an object")
    json.dumps(header, ensure_ascii=False).encode("utf-8")  # lone surrogates from \ud800 escapes
    return header


def _count(header: dict, key: str) -> int:
    value = header[key]
    if type(value) is not int or value < 1:
        raise ValueError(f"{key} must be a positive integer, got {_short(value)}")
    return value


def _counts(header: dict, key: str) -> list[int]:
    values = header[key]
    if not isinstance(values, list):
        raise TypeError(f"{key} must be a list, got {type(values).__name__}")
    for value in values:
        if type(value) is not int or value < 1:
            raise ValueError(f"{key} must hold positive integers, got {_short(value)}")
    return values


def _short(value) -> str:
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."
