"""Trace format: round trip, and rejection of corrupted, truncated and wrong-version files."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from draftlattice import FormatError
from draftlattice.evaluate.trace import Trace, load_trace, save_trace


def small_trace(seed: int = 0, prompts: int = 3, h: int = 3, k: int = 4, vocab: int = 50) -> Trace:
    """A random but valid trace (head 1's top-1 is the greedy token, candidates sorted)."""
    rng = np.random.default_rng(seed)
    out = ([], [], [], [], [])
    for i in range(prompts):
        t = 5 + i
        ids = np.stack([np.stack([rng.choice(vocab, k, replace=False) for _ in range(h)]) for _ in range(t)])
        lps = -np.sort(rng.uniform(0.1, 5.0, (t, h, k)), axis=2)
        out[0].append(rng.integers(0, vocab, 2 + i).astype(np.int32))
        out[1].append(ids[:, 0, 0].astype(np.int32))
        out[2].append(ids.astype(np.int32))
        out[3].append(lps.astype(np.float32))
        out[4].append(rng.uniform(0, 3, (t, h)).astype(np.float32))
    return Trace(*out, vocab_size=vocab, meta={"model": "random", "seed": seed})


def assert_same(a: Trace, b: Trace, atol: float = 0.0) -> None:
    assert a.vocab_size == b.vocab_size and a.meta == b.meta and len(a) == len(b)
    for x, y in zip(a.prompts + a.tokens + a.topk_ids, b.prompts + b.tokens + b.topk_ids):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(a.topk_logprobs + a.entropy, b.topk_logprobs + b.entropy):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def test_round_trip_float32_is_exact(tmp_path):
    trace = small_trace()
    save_trace(trace, tmp_path / "t.dltrace")
    loaded = load_trace(tmp_path / "t.dltrace")
    assert_same(trace, loaded)
    assert loaded.num_heads == 3 and loaded.top_k == 4 and loaded.num_positions == 5 + 6 + 7


def test_round_trip_float16_rounds_logprobs_only(tmp_path):
    trace = small_trace(1)
    save_trace(trace, tmp_path / "t.dltrace", logprob_dtype="float16")
    loaded = load_trace(tmp_path / "t.dltrace")
    assert_same(trace, loaded, atol=5e-3)
    assert (tmp_path / "t.dltrace").stat().st_size < _size(trace, tmp_path)


def _size(trace, tmp_path):
    save_trace(trace, tmp_path / "f32.dltrace")
    return (tmp_path / "f32.dltrace").stat().st_size


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "t.dltrace"
    save_trace(small_trace(2), path)
    return path


def test_every_flipped_byte_is_rejected(saved):
    data = saved.read_bytes()
    for position in range(0, len(data), max(1, len(data) // 97)):
        damaged = bytearray(data)
        damaged[position] ^= 0x40
        saved.write_bytes(bytes(damaged))
        with pytest.raises(FormatError):
            load_trace(saved)


def test_truncated_and_extended_files_are_rejected(saved):
    data = saved.read_bytes()
    for cut in (0, 5, 16, len(data) // 2, len(data) - 1):
        saved.write_bytes(data[:cut])
        with pytest.raises(FormatError):
            load_trace(saved)
    saved.write_bytes(data + b"\0")
    with pytest.raises(FormatError):
        load_trace(saved)


def test_wrong_version_is_named(saved):
    import hashlib

    data = bytearray(saved.read_bytes()[:-32])
    struct.pack_into("<I", data, 8, 2)
    saved.write_bytes(bytes(data) + hashlib.sha256(bytes(data)).digest())
    with pytest.raises(FormatError, match="version 2"):
        load_trace(saved)


def test_consistent_checksum_but_bad_sizes_are_rejected(saved):
    import hashlib
    import json

    data = saved.read_bytes()[:-32]
    header_len = struct.unpack_from("<I", data, 12)[0]
    header = json.loads(data[16 : 16 + header_len])
    header["top_k"] += 1
    head = json.dumps(header).encode()
    body = data[:12] + struct.pack("<I", len(head)) + head + data[16 + header_len :]
    saved.write_bytes(body + hashlib.sha256(body).digest())
    with pytest.raises(FormatError, match="payload"):
        load_trace(saved)


def test_invalid_traces_are_refused():
    trace = small_trace()
    with pytest.raises(ValueError, match="greedy"):
        Trace(
            trace.prompts,
            [t + 1 for t in trace.tokens],
            trace.topk_ids,
            trace.topk_logprobs,
            trace.entropy,
            trace.vocab_size,
        )
    with pytest.raises(ValueError, match="outside"):
        Trace(trace.prompts, trace.tokens, trace.topk_ids, trace.topk_logprobs, trace.entropy, 3)
    with pytest.raises(ValueError, match="entropy"):
        Trace(
            trace.prompts,
            trace.tokens,
            trace.topk_ids,
            trace.topk_logprobs,
            [e[:, :1] for e in trace.entropy],
            trace.vocab_size,
        )


@pytest.mark.parametrize(
    "header,length",
    [
        (b'{"num_heads": Infinity, "top_k": 1}', None),
        (b"[" * 100000 + b"]" * 100000, None),
        (b'{"num_heads": 1e400, "top_k": 1, "vocab_size": 1}', None),
        (b'{"num_heads": 2.0, "top_k": 1, "vocab_size": 1}', None),
        (b'{"num_heads": 99999999999999999999, "top_k": 1, "vocab_size": 1}', None),
        (b"\xff\xfe", None),
        (b"{}", 10**9),
    ],
)
def test_hostile_headers_are_format_errors(tmp_path, header, length):
    """Non-finite or huge numbers, deep nesting, bad UTF-8 and an oversized header length are a
    FormatError naming the file (the sha256 is valid: it detects corruption, not forgery)."""
    import hashlib
    import struct

    from draftlattice import FormatError
    from draftlattice.evaluate.trace import MAGIC, load_trace

    body = MAGIC + struct.pack("<II", 1, len(header) if length is None else length) + header
    path = tmp_path / "hostile.dltrace"
    path.write_bytes(body + hashlib.sha256(body).digest())
    with pytest.raises(FormatError, match="hostile.dltrace"):
        load_trace(path)
