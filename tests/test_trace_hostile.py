"""Hostile trace headers: every one is a FormatError naming the file, raised at load."""

import hashlib
import json
import struct

import numpy as np
import pytest

from draftlattice import FormatError
from draftlattice.evaluate.trace import MAGIC, VERSION, load_trace, save_trace
from test_trace import small_trace


def forge(path, header: bytes, payload: bytes = b"", header_len: int | None = None):
    """A trace with a valid checksum around an arbitrary header and payload."""
    body = MAGIC + struct.pack("<II", VERSION, len(header) if header_len is None else header_len) + header + payload
    path.write_bytes(body + hashlib.sha256(body).digest())
    return path


def good_header(**changes) -> dict:
    header = {
        "num_heads": 1,
        "top_k": 1,
        "vocab_size": 4,
        "logprob_dtype": "float32",
        "prompt_lengths": [1],
        "num_tokens": [1],
        "meta": {},
    }
    header.update(changes)
    return header


def good_payload() -> bytes:
    # prompt [0], token [1], top-1 id [1], logprob [-0.1], entropy [0.5]
    return np.array([0, 1, 1], "<i4").tobytes() + np.array([-0.1, 0.5], "<f4").tobytes()


def test_forged_good_trace_loads(tmp_path):
    trace = load_trace(forge(tmp_path / "t", json.dumps(good_header()).encode(), good_payload()))
    assert trace.tokens[0].tolist() == [1]


HOSTILE = {
    "infinity": b'{"num_heads": Infinity, "top_k": 1}',
    "nan": b'{"num_heads": NaN}',
    "huge float": json.dumps(good_header(num_heads=1e400)).replace("Infinity", "1e400").encode(),
    "float count": json.dumps(good_header(top_k=1.0)).encode(),
    "bool count": json.dumps(good_header(top_k=True)).encode(),
    "huge int": json.dumps(good_header(num_heads=10**300, top_k=10**300)).encode(),
    "too many digits": b'{"num_heads": ' + b"9" * 5000 + b"}",
    "huge prompt list": json.dumps(good_header(prompt_lengths=[10**18] * 3, num_tokens=[10**18] * 3)).encode(),
    "deep nesting": b'{"meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "not utf-8": json.dumps(good_header(meta={"model": "x"})).encode().replace(b'"x"', b'"\xff\xfe"'),
    "lone surrogate": json.dumps(good_header(meta={"model": "\ud800"})).encode(),
    "array header": b"[1, 2]",
    "meta not an object": json.dumps(good_header(meta=[1])).encode(),
    "unhashable dtype": json.dumps(good_header(logprob_dtype=["float32"])).encode(),
    "vocab beyond int32": json.dumps(good_header(vocab_size=2**40)).encode(),
    "mismatched lists": json.dumps(good_header(num_tokens=[1, 1])).encode(),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_header_is_a_format_error(tmp_path, case):
    path = forge(tmp_path / "evil.dltrace", HOSTILE[case], good_payload())
    with pytest.raises(FormatError, match="evil.dltrace"):
        load_trace(path)


def test_header_length_beyond_the_file_is_refused_before_reading(tmp_path):
    path = forge(tmp_path / "t", b"{}", header_len=2**32 - 1)
    with pytest.raises(FormatError, match="header claims 4294967295 bytes"):
        load_trace(path)


def test_nan_logprobs_are_refused(tmp_path):
    payload = np.array([0, 1, 1], "<i4").tobytes() + np.array([np.nan, 0.5], "<f4").tobytes()
    with pytest.raises(FormatError, match="NaN"):
        load_trace(forge(tmp_path / "t", json.dumps(good_header()).encode(), payload))


def test_other_file_kinds_are_named(tmp_path):
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\t<s>\n\n\\end\\\n")
    with pytest.raises(FormatError, match="lm.arpa: not a draftlattice trace .is an ARPA n-gram LM"):
        load_trace(arpa)


def test_meta_that_cannot_load_is_refused_at_save(tmp_path):
    trace = small_trace()
    trace.meta = {"model": "\ud800"}
    with pytest.raises(ValueError, match="valid text"):
        save_trace(trace, tmp_path / "t.dltrace")
    trace.meta = {"x": float("inf")}
    with pytest.raises(ValueError, match="finite"):
        save_trace(trace, tmp_path / "t.dltrace")
    assert not (tmp_path / "t.dltrace").exists()


def test_non_ascii_meta_round_trips(tmp_path):
    trace = small_trace()
    trace.meta = {"model": "modèle ✓"}
    save_trace(trace, tmp_path / "t.dltrace")
    assert load_trace(tmp_path / "t.dltrace").meta == {"model": "modèle ✓"}
