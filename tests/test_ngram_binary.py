"""Binary format: round trip gives identical scores and metadata; damaged files raise."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from arpa_writer import random_arpa
from draftlattice import FormatError, NgramLM


@pytest.fixture
def model_pair(tmp_path):
    arpa = tmp_path / "model.arpa"
    words = random_arpa(arpa, 4, 3, consistent=False, with_unk=True, metadata={"source": "test", "k": "v: w"})
    lm = NgramLM(arpa)
    binary = tmp_path / "model.dlm"
    lm.save(binary)
    return lm, NgramLM(binary), words, binary


def test_round_trip_scores_and_metadata(model_pair):
    arpa_lm, binary_lm, words, _ = model_pair
    assert binary_lm.source_format == "binary" and binary_lm.file_format == "binary"
    assert binary_lm.order == arpa_lm.order
    assert list(binary_lm.counts) == list(arpa_lm.counts)
    assert binary_lm.metadata == arpa_lm.metadata == {"source": "test", "k": "v: w"}
    rng = random.Random(0)
    for _ in range(200):
        tokens = [rng.choice(range(len(words) + 2)) for _ in range(rng.randint(1, 9))]
        context = [rng.choice(range(len(words))) for _ in range(rng.randint(0, 4))]
        bos, eos = rng.random() < 0.5, rng.random() < 0.5
        a = arpa_lm.token_scores(tokens, context, bos, eos)
        b = binary_lm.token_scores(tokens, context, bos, eos)
        assert np.array_equal(a, b)
        assert arpa_lm.start(context, bos).word_ids == binary_lm.start(context, bos).word_ids


def test_round_trip_wt2_pruned(shared_data, tmp_path):
    plain = NgramLM(shared_data / "lm" / "wt2_kn3_pruned.arpa.xz")
    vocab = [plain.word(i) for i in range(plain.vocab_size)]
    lm = NgramLM(shared_data / "lm" / "wt2_kn3_pruned.arpa.xz", vocab=vocab)
    lm.save(tmp_path / "m.dlm")
    again = NgramLM(tmp_path / "m.dlm", vocab=vocab)
    assert list(again.counts) == [33279, 204138, 195085]
    index = {w: i for i, w in enumerate(vocab)}
    lines = (shared_data / "wikitext-2" / "valid.txt").read_text(encoding="utf-8").splitlines()
    for line in lines[:300]:
        ids = [index[w] if w in index else index["<unk>"] for w in line.split()]
        a = lm.token_scores(ids, bos=True, eos=True)
        assert np.array_equal(a, again.token_scores(ids, bos=True, eos=True))


def test_save_never_overwrites_unless_asked(model_pair, tmp_path):
    arpa_lm, _, _, binary = model_pair
    before = binary.read_bytes()
    with pytest.raises(FileExistsError, match="exists"):
        arpa_lm.save(binary)
    arpa_lm.save(binary, overwrite=True)
    assert binary.read_bytes() == before  # deterministic output


def corrupt(path, offset, value):
    data = bytearray(path.read_bytes())
    data[offset] ^= value
    path.write_bytes(bytes(data))


def test_corrupted_byte_raises(model_pair):
    *_, binary = model_pair
    size = binary.stat().st_size
    for offset in (size // 2, size - 1, 400):
        data = binary.read_bytes()
        corrupt(binary, offset, 0x40)
        with pytest.raises(FormatError, match="checksum"):
            NgramLM(binary)
        binary.write_bytes(data)
    NgramLM(binary)


@pytest.mark.parametrize("keep", [0, 7, 100, 319, 320, 1000, -8, -1])
def test_truncated_file_raises(model_pair, keep):
    *_, binary = model_pair
    data = binary.read_bytes()
    binary.write_bytes(data[:keep] if keep >= 0 else data[: len(data) + keep])
    with pytest.raises(FormatError, match="truncated|magic"):
        NgramLM(binary)


def test_wrong_magic_is_read_as_arpa_and_fails(model_pair):
    *_, binary = model_pair
    data = bytearray(binary.read_bytes())
    data[0:8] = b"DLNGRAX\x00"
    binary.write_bytes(bytes(data))
    with pytest.raises(FormatError):
        NgramLM(binary)


def test_future_version_raises(model_pair):
    *_, binary = model_pair
    data = bytearray(binary.read_bytes())
    data[8:12] = struct.pack("<I", 99)
    binary.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="version 99"):
        NgramLM(binary)


def test_header_size_fields_are_validated(model_pair):
    *_, binary = model_pair
    data = bytearray(binary.read_bytes())
    data[16:20] = struct.pack("<I", 9)  # order
    binary.write_bytes(bytes(data))
    with pytest.raises(FormatError):
        NgramLM(binary)


def _reseal(data: bytearray) -> None:
    """Recompute the checksum of a file image, as a forger would (header checksum field zeroed)."""
    from draftlattice import _core

    header = bytearray(data[:HEADER_BYTES])
    header[32:40] = bytes(8)
    seed = _core.binary_checksum(bytes(header), 0)
    data[32:40] = struct.pack("<Q", _core.binary_checksum(bytes(data[HEADER_BYTES:]), seed))


HEADER_BYTES = 8 + 4 * 4 + 8 * 3 + 8 * 8 * 2 + 8 * 6 + 8 * 8 + 8 * 5  # csrc/ngram/binary.cc BinaryHeader (version 4)


def test_forged_full_table_raises_instead_of_hanging(model_pair):
    """A validly sealed file whose bigram table has no empty bucket is refused at load; lookups
    would otherwise probe forever."""
    *_, binary = model_pair
    data = bytearray(binary.read_bytes())
    assert struct.unpack_from("<I", data, 20)[0] == HEADER_BYTES
    buckets = struct.unpack_from("<Q", data, 112 + 8)[0]  # buckets[1]: the 2-gram table
    offset = struct.unpack_from("<Q", data, 224 + 8)[0]  # table_offset[1]
    for b in range(buckets):
        entry = offset + 16 * b
        if struct.unpack_from("<Q", data, entry)[0] == 0:
            struct.pack_into("<Q", data, entry, 0xFFFF0000 + 4 * b)  # a key no lookup will match
    _reseal(data)
    binary.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="2-gram table has no empty bucket"):
        NgramLM(binary)
