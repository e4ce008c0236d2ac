"""Retrieval drafts from a datastore (draftlattice.datastore, csrc/datastore.h) against a
brute-force reference that scans every record."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from draftlattice import Datastore, FormatError
from draftlattice.decode.drafters import ContextLookup

END = -1  # a record's end, below every token id (the reference's separator)


def reference(records, context, max_ngram, min_ngram, length, min_count):
    """The datastore's rule by scanning: longest matched suffix, then the most frequent next
    token (ties: the lower id, a record's end lowest) among the occurrences still following."""
    for n in range(min(max_ngram, len(context)), min_ngram - 1, -1):
        pattern = list(context[len(context) - n :])
        ends = [
            (r, i + n) for r, rec in enumerate(records) for i in range(len(rec) - n + 1) if rec[i : i + n] == pattern
        ]
        if not ends:
            continue
        draft = []
        for step in range(length):
            nexts = Counter(records[r][at] if at < len(records[r]) else END for r, at in ends)
            top = max(nexts.values())
            token = min(t for t, c in nexts.items() if c == top)
            if token == END or (step > 0 and top < min_count):
                break
            draft.append(token)
            ends = [(r, at + 1) for r, at in ends if at < len(records[r]) and records[r][at] == token]
        return draft
    return []


@pytest.mark.parametrize("seed", range(6))
def test_continuation_matches_brute_force(seed):
    rng = random.Random(seed)
    vocab = rng.choice([3, 5, 9])
    records = [[rng.randrange(vocab) for _ in range(rng.randrange(0, 40))] for _ in range(rng.randrange(1, 12))]
    max_ngram = rng.randrange(1, 5)
    settings = dict(max_ngram=max_ngram, min_ngram=rng.randrange(1, max_ngram + 1), min_count=rng.randrange(1, 4))
    store = Datastore.from_records(records, max_length=8, **settings)
    for _ in range(200):
        context = [rng.randrange(vocab) for _ in range(rng.randrange(0, 8))]
        length = rng.randrange(1, 9)
        expected = reference(
            records, context, settings["max_ngram"], settings["min_ngram"], length, settings["min_count"]
        )
        assert store.continuation(context, length) == expected, (records, context, length, settings)


def test_draft_follows_the_most_frequent_continuation():
    store = Datastore.from_records([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 5], [7, 2, 9, 4]], min_ngram=1)
    assert store.continuation([8, 1, 2], 4) == [3, 5]  # 5 follows "1 2 3" twice, 4 once
    assert store.continuation([9, 2], 4) == [3, 5]  # "9 2" never occurs: "2" does, followed by 3 thrice
    assert store.continuation([6, 6], 3) == []
    # one occurrence drafts one token (min_count=2 for the rest)
    assert store.continuation([7, 2], 3) == [9]


def test_no_match_across_records():
    store = Datastore.from_records([[1, 2], [3, 4]], min_ngram=1)
    assert store.continuation([2], 3) == []  # a record's end follows 2, not record 2's start
    assert store.continuation([5, 2, 3], 3) == [4]  # "2 3" spans two records: only "3" matches


def test_save_and_load_round_trip(tmp_path):
    store = Datastore.from_records([[5, 6, 7, 8], [70000, 6, 7, 9], [5, 6, 7, 9]], min_ngram=1)
    path = tmp_path / "store.npz"
    store.save(path)
    loaded = Datastore.load(path, min_ngram=1)
    assert loaded.num_tokens == 12 and loaded.num_records == 3
    assert loaded.continuation([6, 7], 2) == store.continuation([6, 7], 2) == [9]
    with pytest.raises(FileExistsError, match="overwrite=True"):
        store.save(path)
    narrow = Datastore.from_records([[1, 2, 3]])
    narrow.save(path, overwrite=True)
    assert np.load(path)["tokens"].dtype == np.uint16
    assert Datastore.load(path).num_tokens == 3


def test_corrupt_or_foreign_files_are_format_errors(tmp_path):
    text = tmp_path / "text.npz"
    text.write_text("not a datastore")
    with pytest.raises(FormatError, match="not a readable datastore"):
        Datastore.load(text)
    other = tmp_path / "other.npz"
    np.savez(other, tokens=np.arange(3))
    with pytest.raises(FormatError, match="not a draftlattice datastore"):
        Datastore.load(other)
    bad = tmp_path / "bad.npz"
    np.savez(
        bad,
        format=np.array("draftlattice-datastore"),
        version=np.array(1),
        tokens=np.arange(3),
        offsets=np.array([0, 5]),
    )
    with pytest.raises(FormatError, match="offsets"):
        Datastore.load(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Datastore.load(tmp_path / "missing.npz")
    # a member that is not a .npy array (np.load hands its bytes over): a fuzzing find
    import zipfile

    raw = tmp_path / "raw.npz"
    Datastore.from_records([[1, 2, 3]]).save(raw)
    with zipfile.ZipFile(raw, "a") as archive:
        archive.writestr("offsets", b"\x00\x01")
    with zipfile.ZipFile(raw) as archive:
        kept = {name: archive.read(name) for name in archive.namelist() if name != "offsets.npy"}
    with zipfile.ZipFile(raw, "w") as archive:
        for name, data in kept.items():
            archive.writestr(name, data)
    with pytest.raises(FormatError, match="offsets must be a 1-D integer array"):
        Datastore.load(raw)
    # flipped bits anywhere (compressed data, zip records, the array headers): FormatError only
    Datastore.from_records([list(range(300))] * 3).save(tmp_path / "good.npz")
    good = (tmp_path / "good.npz").read_bytes()
    rng = random.Random(0)
    for _ in range(200):
        flipped = bytearray(good)
        for _ in range(3):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        (tmp_path / "flipped.npz").write_bytes(flipped)
        try:
            Datastore.load(tmp_path / "flipped.npz")
        except FormatError:
            pass


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="token ids must be >= 0"):
        Datastore.from_records([[1, -3]])
    with pytest.raises(ValueError, match="must not decrease"):
        Datastore(np.array([1, 2, 3]), np.array([0, 2, 1, 3]))
    with pytest.raises(ValueError, match="must not decrease"):  # a record past the end (a fuzzing find)
        Datastore(np.zeros(0, dtype=np.int64), np.array([0, 64, 0]))
    with pytest.raises(ValueError, match="min_ngram .* must not exceed max_ngram"):
        Datastore.from_records([[1]], max_ngram=2, min_ngram=3)
    with pytest.raises(ValueError, match="min_count must be a positive int"):
        Datastore.from_records([[1]], min_count=0)
    store = Datastore.from_records([[1, 2]], max_length=4)
    with pytest.raises(ValueError, match="length must be an int in 1..4"):
        store.continuation([1], 5)
    with pytest.raises(ValueError, match="max_length"):
        ContextLookup(None, length=6, datastore=store)


def test_lookup_falls_back_to_the_datastore():
    store = Datastore.from_records([[10, 11, 12, 13], [10, 11, 12, 13]], min_ngram=2)
    lookup = ContextLookup(None, max_ngram=3, length=3, datastore=store)
    # the context has its own copy: kept
    drafts, _ = lookup.finish(lookup.propose(None, None, 1), [], [[4, 5, 6, 4, 5]], None)
    assert drafts[0, 0].tolist() == [6, 4, 5]
    # none of its own: the datastore's
    drafts, _ = lookup.finish(lookup.propose(None, None, 1), [], [[1, 2, 10, 11]], None)
    assert drafts[0, 0].tolist() == [12, 13]
    drafts, _ = lookup.finish(lookup.propose(None, None, 1), [], [[1, 2, 3]], None)
    assert drafts[0, 0].tolist() == [-1]


def test_cli_collects_distilled_answers(tmp_path, capsys):
    import json

    from draftlattice.cli.main import main
    from draftlattice.distilled_corpus import FORMAT, META, write_shard

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / META).write_text(json.dumps({"format": FORMAT, "version": 1, "mode": "greedy"}))
    write_shard(corpus / "shard-00000.npz", [(np.array([1, 2, 3, 4, 5]), 2), (np.array([1, 9, 3, 4, 6]), 1)])
    out = tmp_path / "store.npz"
    assert main(["hf", "datastore", str(corpus), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    store = Datastore.load(out, min_ngram=1)
    assert store.num_tokens == 7 and store.num_records == 2  # answers only: [3, 4, 5], [9, 3, 4, 6]
    assert store.continuation([3], 3) == [4]  # 5 and 6 once each: one token
    assert main(["hf", "datastore", str(corpus), "-o", str(out)]) == 1
    assert "exists (use --force" in capsys.readouterr().err
    assert main(["hf", "datastore", str(tmp_path / "missing"), "-o", str(out), "--force"]) == 1
    assert "no such distilled corpus folder" in capsys.readouterr().err
