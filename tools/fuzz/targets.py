"""Fuzz targets: each takes the fuzzer's bytes and drives one input path of draftlattice.

A target may raise only the exceptions a user is promised for bad input (``EXPECTED``): a
``FormatError``/``ValueError``/``TypeError`` naming the problem, or ``OSError`` for files. Any
other exception, a crash (signal), a hang or a leak is a finding. Formats with a checksum are
re-sealed after mutation, so that the mutations reach the parser behind the checksum instead of
stopping at it.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import tempfile

import numpy as np

import draftlattice as dl
from draftlattice import _core
from draftlattice.evaluate.trace import MAGIC as TRACE_MAGIC
from draftlattice.evaluate.trace import load_trace

EXPECTED = (ValueError, TypeError, OSError)  # FormatError is a ValueError
_TMP = tempfile.mkdtemp(prefix="dlfuzz-")


def _file(data: bytes, suffix: str) -> str:
    path = os.path.join(_TMP, "input" + suffix)
    with open(path, "wb") as out:
        out.write(data)
    return path


def _exercise(lm) -> None:
    """Score a few ids through every query path of a loaded LM."""
    ids = np.arange(min(lm.vocab_size, 6), dtype=np.int32)
    lm.token_scores(ids, np.zeros(0, dtype=np.int32), True, True)
    state = lm.start(np.zeros(0, dtype=np.int32), True)
    for token in ids.tolist():
        _, state = lm.step(state, token)


def arpa(data: bytes) -> None:
    """ARPA text: parse, then query; every third input goes through the streamed gzip reader
    (with a small decompression limit, so the limit's error path is reached too)."""
    if len(data) % 3 == 0:
        lm = dl.NgramLM(_file(gzip.compress(data, 1), ".arpa.gz"), max_decompressed_bytes=1 << 16)
    else:
        lm = dl.NgramLM(_file(data, ".arpa"))
    _exercise(lm)


def reseal_dlm(data: bytes) -> bytes:
    """Recompute the .dlm checksum (header field at byte 32, header length at byte 20)."""
    if len(data) < 40:
        return data
    (header_bytes,) = struct.unpack_from("<I", data, 20)
    if not 40 <= header_bytes <= len(data):
        return data
    header = bytearray(data[:header_bytes])
    header[32:40] = bytes(8)
    seed = _core.binary_checksum(bytes(header), 0)
    checksum = _core.binary_checksum(data[header_bytes:], seed)
    return data[:32] + struct.pack("<Q", checksum) + data[40:]


def dlm(data: bytes) -> None:
    """Binary LM: map (or, for odd lengths, read a private copy), validate, query (checksum
    re-sealed)."""
    _exercise(dl.NgramLM(_file(reseal_dlm(data), ".dlm"), copy=len(data) % 2 == 1))


def reseal_trace(data: bytes) -> bytes:
    """Replace the trailing sha256 by the digest of everything before it."""
    if len(data) < 32 or not data.startswith(TRACE_MAGIC):
        return data
    body = data[:-32]
    return body + hashlib.sha256(body).digest()


def trace(data: bytes) -> None:
    """Decoding trace: load (checksum re-sealed) and touch every array."""
    loaded = load_trace(_file(reseal_trace(data), ".dltrace"))
    for arrays in (loaded.prompts, loaded.tokens, loaded.topk_ids, loaded.topk_logprobs, loaded.entropy):
        for array in arrays:
            np.asarray(array).sum()


_LM = None


def _small_lm():
    global _LM
    if _LM is None:
        _LM = dl.NgramLM(os.path.join(os.path.dirname(__file__), "corpus", "arpa", "katz3.arpa"))
    return _LM


def arrays(data: bytes) -> None:
    """The array API: lattices from fuzzed shapes and values, rescoring, sampling, oracle.

    Parameters are valid most of the time (so the mutations reach the search and the sampler)
    and out of range one time in eight each.
    """
    import atheris

    fdp = atheris.FuzzedDataProvider(data)

    def pick(low: int, high: int, bad_low: int, bad_high: int) -> int:
        odd = fdp.ConsumeIntInRange(0, 7) == 7  # an exhausted input reads 0: valid
        return fdp.ConsumeIntInRange(bad_low, bad_high) if odd else fdp.ConsumeIntInRange(low, high)

    h, vocab = pick(1, 6, 0, 8), pick(1, 40, 0, 64)
    k = pick(1, max(1, min(vocab, 8)), 0, 70)
    kind = fdp.ConsumeIntInRange(0, 3)
    values = (
        fdp.ConsumeFloatListInRange(h * vocab, -30.0, 30.0)
        if kind < 2
        else fdp.ConsumeFloatListInRange(h * vocab, -1e30, 1e30)
        if kind == 2
        else fdp.ConsumeFloatList(h * vocab)
    )
    with np.errstate(over="ignore"):
        logits = np.asarray(values + [0.0] * (h * vocab - len(values)), dtype=np.float32).reshape(h, vocab)
    temperature = fdp.ConsumeFloatInRange(-0.5, 4.0) if fdp.ConsumeIntInRange(0, 3) == 3 else 1.0
    lm = _small_lm()
    lattice = dl.Lattice.from_logits(logits, k, temperature=temperature)
    context = fdp.ConsumeIntListInRange(fdp.ConsumeIntInRange(0, 6), 0, vocab - 1)
    if fdp.ConsumeIntInRange(0, 7) == 7:
        context.append(fdp.ConsumeIntInRange(-3, 3) + (vocab if fdp.ConsumeBool() else 0))
    p, alpha = pick(1, 20, -2, 10**6), (fdp.ConsumeFloatInRange(0.0, 3.0) if fdp.ConsumeBool() else fdp.ConsumeFloat())
    best = dl.rescore(lattice, lm, p=p, alpha=alpha, context=context)
    # The decoder's way (the LM state advanced by the accepted tokens) finds the same drafts.
    after = lm.advance(lm.start(context[:-1], False), context[-1:])
    assert after == lm.start(context, False)
    stepped = dl.rescore(lattice, lm, p=p, alpha=alpha, context=after)
    assert np.array_equal(stepped.tokens, best.tokens) and np.array_equal(stepped.scores, best.scores)
    dl.sample_drafts(lattice, lm, n=pick(1, 4, -1, 100), alpha=alpha, context=context, generator=1)
    dl.oracle_draft(lattice, fdp.ConsumeIntListInRange(h, 0, vocab - 1))
    keys = np.asarray(fdp.ConsumeIntListInRange(h * vocab, 0, 255) + [0] * h * vocab)[: h * vocab]
    tokens = np.argsort(keys.reshape(h, vocab), axis=1, kind="stable")[:, :k]  # distinct per head
    with np.errstate(over="ignore"):
        logprobs = np.asarray(fdp.ConsumeFloatListInRange(h * k, -30.0, 0.0) + [0.0] * h * k, dtype=np.float32)[: h * k]
    dl.rescore(dl.Lattice.from_topk(tokens, -np.abs(logprobs).reshape(h, k)), lm, p=p, alpha=1.0)


def datastore(data: bytes) -> None:
    """Retrieval datastore: a file (inputs that start as a zip archive: the .npz loader and its
    checks) or records, settings and queries from fuzzed values (the C++ index and its checks);
    then queries, whose drafts must be in-range token ids no longer than asked."""
    import atheris

    if data.startswith(b"PK"):
        store = dl.Datastore.load(_file(data, ".npz"), min_ngram=1)
    else:
        fdp = atheris.FuzzedDataProvider(data)
        tokens = fdp.ConsumeIntListInRange(fdp.ConsumeIntInRange(0, 64), -1, 12)
        cuts = sorted(fdp.ConsumeIntListInRange(fdp.ConsumeIntInRange(0, 6), 0, len(tokens)))
        offsets = [0, *cuts, len(tokens)] if fdp.ConsumeIntInRange(0, 7) else fdp.ConsumeIntListInRange(3, -2, 70)
        settings = {name: fdp.ConsumeIntInRange(0, 6) for name in ("max_ngram", "min_ngram", "min_count", "max_length")}
        store = dl.Datastore(np.array(tokens, dtype=np.int64), np.array(offsets, dtype=np.int64), **settings)
    fdp = atheris.FuzzedDataProvider(data[-64:])
    for _ in range(4):
        context = fdp.ConsumeIntListInRange(fdp.ConsumeIntInRange(0, 8), 0, 12)
        length = fdp.ConsumeIntInRange(0, store.max_length + 1)
        draft = store.continuation(context, length)
        if len(draft) > length or any(not 0 <= t < 1 << 31 for t in draft):
            raise AssertionError(f"draft {draft} for length {length}")


TARGETS = {"arpa": arpa, "dlm": dlm, "trace": trace, "arrays": arrays, "datastore": datastore}
