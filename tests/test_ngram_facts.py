"""Facts computed at load for fast exact search: suffix closure (early-stop probing) and per-word
upper bounds of ln p(w | any history) (admissible A* heuristic); both kept by the binary format.

References are independent: suffix closure recomputed from the ARPA's word tuples, bounds checked
against brute-force Katz scores (tests/ngram_reference.py) over every history."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from arpa_writer import all_histories, random_arpa, rewrite_backoffs, skewed_arpa
from draftlattice import NgramLM, _core
from ngram_reference import BruteForceLM, read_arpa

MODELS = [(order, seed, consistent) for order in (2, 3, 4) for seed in range(6) for consistent in (True, False)]


def stored_suffix_closed(path) -> bool:
    """Suffix closure of the stored set (listed n-grams and the prefixes of listed n-grams)."""
    _, probs, _ = read_arpa(path)
    stored = set(probs)
    for gram in probs:
        stored.update(gram[:m] for m in range(1, len(gram)))
    return all(gram[1:] in stored for gram in stored if len(gram) >= 2)


def test_suffix_closure_detected(tmp_path):
    seen = set()
    for order, seed, consistent in MODELS:
        path = tmp_path / f"m{order}{seed}{consistent}.arpa"
        random_arpa(path, order, seed, consistent=consistent)
        expected = stored_suffix_closed(path)
        seen.add(expected)
        assert NgramLM(path).suffix_closed == expected, (order, seed, consistent)
        if consistent:
            assert expected
    assert seen == {True, False}  # both paths exercised


def test_suffix_closure_hand_written(tmp_path):
    def model(trigrams: list[str]) -> NgramLM:
        uni = ["a", "b", "c", "d"]
        bi = ["a b", "b c", "c d"]
        lines = ["\\data\\", f"ngram 1={len(uni)}", f"ngram 2={len(bi)}", f"ngram 3={len(trigrams)}", ""]
        lines += ["\\1-grams:"] + [f"-1.0\t{w}\t-0.5" for w in uni] + [""]
        lines += ["\\2-grams:"] + [f"-0.5\t{g}\t-0.2" for g in bi] + [""]
        lines += ["\\3-grams:"] + [f"-0.3\t{g}" for g in trigrams] + ["", "\\end\\", ""]
        path = tmp_path / f"h{len(trigrams)}.arpa"
        path.write_text("\n".join(lines), encoding="utf-8")
        return NgramLM(path)

    assert model(["a b c", "b c d"]).suffix_closed
    assert not model(["a b c", "b d a"]).suffix_closed  # suffix "d a" of "b d a" is not stored
    # "a c d": its suffix "c d" is listed, but its prefix "a c" is a blank whose suffix "c" is a
    # unigram: closed.
    assert model(["a c d"]).suffix_closed


@pytest.mark.parametrize("order,seed,consistent", MODELS[::3])
def test_word_bounds_are_admissible(tmp_path, order, seed, consistent):
    path = tmp_path / "m.arpa"
    words = random_arpa(path, order, seed, n_words=5, consistent=consistent, with_unk=seed % 2 == 0)
    lm = NgramLM(path)
    ref = BruteForceLM(path)
    bounds = lm.word_bounds
    assert bounds.shape == (lm.vocab_size,) and bounds.dtype == np.float32
    targets = words + ["</s>"] + (["<unk>"] if seed % 2 == 0 else [])
    histories = [list(h) for h in all_histories(words, order - 1)]
    histories += [["<s>"] + h[1:] for h in histories if h]
    for word in targets:
        best = max(ref.logprob(h, word) for h in histories)
        bound = float(bounds[lm.words().index(word)])
        assert best <= bound, (word, best, bound)
        _, _, backoffs = read_arpa(path)
        if all(b <= 0 for b in backoffs.values()):
            # No backoff weight above 1: the bound is the best listed probability, attained.
            assert bound <= best + 1e-4 * (1 + abs(best)), (word, best, bound)


def test_word_bounds_admissible_on_sampled_histories(shared_data):
    """wt2_kn3_pruned (inconsistently pruned KenLM output): bound >= every sampled ln p(w | h)."""
    words = NgramLM(shared_data / "lm" / "wt2_kn3_pruned.arpa.xz").words()
    lm = NgramLM(shared_data / "lm" / "wt2_kn3_pruned.arpa.xz", vocab=words)  # token i = word i
    bounds = lm.word_bounds
    rng = np.random.default_rng(0)
    for _ in range(200):
        state = lm.start(rng.integers(0, len(words), size=2).tolist(), False)
        for word in rng.integers(0, len(words), size=50).tolist():
            score, _ = lm.step(state, word)
            assert score <= bounds[word], (state, words[word], score, bounds[word])
    assert np.median(bounds) < -0.5  # informative, not a constant 0


def with_new_checksum(data: bytearray) -> bytearray:
    """The binary file's checksum field recomputed (over the header with that field zeroed, then
    the body), after a test edited the file."""
    size = struct.unpack("<I", data[20:24])[0]  # header_bytes
    header = bytearray(data[:size])
    header[32:40] = bytes(8)
    seed = _core.binary_checksum(np.frombuffer(bytes(header), np.uint8), 0)
    checksum = _core.binary_checksum(np.frombuffer(bytes(data[size:]), np.uint8), seed)
    data[32:40] = struct.pack("<Q", checksum)
    return data


# Byte offsets of the section offsets in the binary header (csrc/ngram/binary.cc BinaryHeader):
# metadata, vocab offsets, vocab blob, unigrams, the tables, word bounds, pair bounds, word slack.
SECTION_OFFSETS = [176, 192, 200, 216, *range(224, 288, 8), 296, 304, 312]


def rewrite_as_version_3(data: bytearray) -> bytearray:
    """The same model in binary format version 3: the 320-byte header (without the extension
    masks' offset, every section 8 bytes earlier) and no extension masks (new checksum)."""
    assert struct.unpack("<I", data[8:12])[0] == 4 and struct.unpack("<I", data[20:24])[0] == 328
    flags = struct.unpack("<Q", data[288:296])[0]
    masks = struct.unpack("<Q", data[320:328])[0] if flags & 4 else 0
    if masks:  # the last section
        del data[masks:]
    del data[320:328]
    for at in SECTION_OFFSETS:
        offset = struct.unpack("<Q", data[at : at + 8])[0]
        if offset:
            data[at : at + 8] = struct.pack("<Q", offset - 8)
    data[288:296] = struct.pack("<Q", flags & ~4)
    data[8:12] = struct.pack("<I", 3)
    data[20:24] = struct.pack("<I", 320)
    data[24:32] = struct.pack("<Q", len(data))
    return with_new_checksum(data)


def rewrite_as_version_1(data: bytearray) -> bytearray:
    """The same model in binary format version 1 (no flags, no bounds section; new checksum)."""
    data = rewrite_as_version_3(data)
    data[8:12] = struct.pack("<I", 1)
    data[288:304] = bytes(16)  # flags, word_bound_offset: reserved (zero) in version 1
    return with_new_checksum(data)


@pytest.mark.parametrize("consistent", [True, False])
def test_binary_round_trip_and_version_1(tmp_path, consistent):
    path = tmp_path / "m.arpa"
    random_arpa(path, 4, 3, consistent=consistent)
    lm = NgramLM(path)
    lm.save(tmp_path / "m.dlm")
    again = NgramLM(tmp_path / "m.dlm")
    assert again.suffix_closed == lm.suffix_closed == stored_suffix_closed(path)
    assert np.array_equal(again.word_bounds, lm.word_bounds)

    old = tmp_path / "v1.dlm"
    old.write_bytes(bytes(rewrite_as_version_1(bytearray((tmp_path / "m.dlm").read_bytes()))))
    v1 = NgramLM(old)
    assert not v1.suffix_closed  # unknown: probe every order
    assert np.all(v1.word_bounds >= lm.word_bounds)  # weaker (one bound for all words), admissible
    rng = random.Random(0)
    for _ in range(100):
        tokens = [rng.randrange(6) for _ in range(rng.randint(1, 8))]
        context = [rng.randrange(6) for _ in range(rng.randint(0, 4))]
        assert np.array_equal(
            v1.token_scores(tokens, context, True, True), lm.token_scores(tokens, context, True, True)
        )


def with_positive_backoffs(path, seed: int) -> None:
    """Backoffs in log10 [-1, +1.5] (weights up to 30: a pruned Katz model's reach e^6)."""
    rewrite_backoffs(path, seed, -1.0, 1.5)


BOUND_MODELS = [(o, s, kind) for o in (2, 3, 4) for s in range(3) for kind in ("plain", "positive", "skewed")]


@pytest.mark.parametrize("order,seed,kind", [m for m in BOUND_MODELS if m[0] > 2 or m[2] != "skewed"])
def test_search_bounds_are_the_best_score_after_the_last_word(tmp_path, order, seed, kind):
    """search_bounds[v, w] >= ln p(w | h) for every history h ending in v (brute force over all
    histories), in suffix-closed models; with no backoff above 1 it is that maximum (attained:
    the pair bound keeps every longer n-gram ending in "v w", the absent-bigram bound v's backoff),
    so a bound computed too tight or too loose fails here. Kinds: random consistent models, the
    same with backoffs above 1, and skewed ones with blank bigrams (arpa_writer.skewed_arpa)."""
    path = tmp_path / "m.arpa"
    if kind == "skewed":
        assert skewed_arpa(path, order, 500 + seed) > 0
        words = [str(i) for i in range(6)]
    else:
        words = random_arpa(path, order, 500 + seed, n_words=5, consistent=True)
    positive = kind == "positive"
    if positive:
        with_positive_backoffs(path, seed)
    lm, ref = NgramLM(path), BruteForceLM(path)
    assert lm.suffix_closed
    tokens = [int(w) for w in words]
    bounds = lm.search_bounds(tokens, tokens)
    assert bounds.shape == (len(tokens), len(tokens)) and bounds.dtype == np.float32
    histories = [list(h) for h in all_histories(words, order - 1) if h]
    histories += [["<s>"] + h[1:] for h in histories]
    tighter = 0
    for i, v in enumerate(words):
        after_v = [h for h in histories if h[-1] == v]
        for j, w in enumerate(words):
            best = max(ref.logprob(h, w) for h in after_v)
            bound = float(bounds[i, j])
            assert best <= bound, (v, w, best, bound)
            if not positive:
                assert bound <= best + 1e-4 * (1 + abs(best)), (v, w, best, bound)
            tighter += bound < lm.word_bounds[lm.words().index(w)] - 1e-3
    assert tighter > 0  # the pair bounds, not only the per-word ones, were exercised


def bounds_given_the_word_before(tmp_path, order: int, seed: int, kind: str) -> int:
    """Checks search_bounds(prev, tokens, before)[v, w] >= ln p(w | h) for every history h ending
    in "u v" with u in before (brute force), for every single word and a few random sets as
    before, and <= the bounds without before; returns how many were strictly tighter."""
    path = tmp_path / f"m{order}-{seed}-{kind}.arpa"
    if kind == "skewed":
        assert skewed_arpa(path, order, 700 + seed) > 0
        words = [str(i) for i in range(6)]
    else:
        words = random_arpa(path, order, 700 + seed, n_words=5, consistent=True)
    if kind == "positive":
        with_positive_backoffs(path, seed)
    lm, ref = NgramLM(path), BruteForceLM(path)
    tokens = [int(w) for w in words]
    plain = lm.search_bounds(tokens, tokens)
    histories = [list(h) for h in all_histories(words, order - 1) if len(h) >= 2]
    histories += [["<s>"] + h[1:] for h in histories if len(h) >= 3]
    rng = random.Random(seed)
    tighter = 0
    for before in [[u] for u in words] + [rng.sample(words, rng.randint(2, 3)) for _ in range(4)]:
        bounds = lm.search_bounds(tokens, tokens, before=[int(u) for u in before])
        assert np.all(bounds <= plain + 1e-6)
        for i, v in enumerate(words):
            after_uv = [h for h in histories if h[-1] == v and h[-2] in before]
            for j, w in enumerate(words):
                best = max(ref.logprob(h, w) for h in after_uv)
                assert best <= float(bounds[i, j]), (before, v, w, best, float(bounds[i, j]))
        tighter += int(np.sum(bounds < plain - 1e-3))
    return tighter


@pytest.mark.parametrize("order,seed,kind", [m for m in BOUND_MODELS if m[0] > 2])
def test_search_bounds_given_the_word_before_are_admissible(tmp_path, order, seed, kind):
    bounds_given_the_word_before(tmp_path, order, seed, kind)


def test_search_bounds_given_the_word_before_are_tighter_somewhere(tmp_path):
    # The extension masks (pair_bound.h) must cut some pair bound: else the refinement is dead.
    # (With backoffs above 1 the bigram's slack can exceed what the longer n-grams add.)
    assert sum(bounds_given_the_word_before(tmp_path, o, s, "plain") for o in (3, 4) for s in range(3)) > 0


def rewrite_as_version_2(data: bytearray) -> bytearray:
    """The same model in binary format version 2 (no pair bounds; new checksum)."""
    data = rewrite_as_version_3(data)
    data[8:12] = struct.pack("<I", 2)
    flags = struct.unpack("<Q", data[288:296])[0]
    data[288:296] = struct.pack("<Q", flags & ~2)  # kFlagPairBounds
    data[304:320] = bytes(16)  # pair bound and word slack offsets: reserved (zero) in version 2
    return with_new_checksum(data)


def test_binary_keeps_the_extension_masks_and_version_3_loads_without_them(tmp_path):
    path = tmp_path / "m.arpa"
    words = random_arpa(path, 4, 704, n_words=5, consistent=True)  # with 3- and 4-grams
    tokens = [int(w) for w in words]
    lm = NgramLM(path)
    lm.save(tmp_path / "m.dlm")
    again = NgramLM(tmp_path / "m.dlm")
    before = tokens[:2]
    assert np.array_equal(again.search_bounds(tokens, tokens, before), lm.search_bounds(tokens, tokens, before))
    assert np.any(lm.search_bounds(tokens, tokens, before) < lm.search_bounds(tokens, tokens))

    old = tmp_path / "v3.dlm"
    old.write_bytes(bytes(rewrite_as_version_3(bytearray((tmp_path / "m.dlm").read_bytes()))))
    v3 = NgramLM(old)
    # Without masks `before` changes nothing: the pair bounds of version 3.
    assert np.array_equal(v3.search_bounds(tokens, tokens, before), lm.search_bounds(tokens, tokens))
    rng = random.Random(1)
    for _ in range(50):
        toks = [rng.randrange(5) for _ in range(rng.randint(1, 8))]
        context = [rng.randrange(5) for _ in range(rng.randint(0, 4))]
        assert np.array_equal(v3.token_scores(toks, context, True, True), lm.token_scores(toks, context, True, True))


def test_binary_keeps_the_pair_bounds_and_version_2_loads_without_them(tmp_path):
    path = tmp_path / "m.arpa"
    words = random_arpa(path, 4, 7, n_words=6, consistent=True)
    with_positive_backoffs(path, 7)
    tokens = [int(w) for w in words]
    lm = NgramLM(path)
    lm.save(tmp_path / "m.dlm")
    again = NgramLM(tmp_path / "m.dlm")
    assert np.array_equal(again.search_bounds(tokens, tokens), lm.search_bounds(tokens, tokens))

    old = tmp_path / "v2.dlm"
    old.write_bytes(bytes(rewrite_as_version_2(bytearray((tmp_path / "m.dlm").read_bytes()))))
    v2 = NgramLM(old)
    assert v2.suffix_closed
    # Without pair bounds: the per-word bounds and one backoff slack for all words (weaker).
    assert np.all(v2.search_bounds(tokens, tokens) >= lm.search_bounds(tokens, tokens))
    assert np.any(v2.search_bounds(tokens, tokens) > lm.search_bounds(tokens, tokens))
    rng = random.Random(0)
    for _ in range(50):
        toks = [rng.randrange(6) for _ in range(rng.randint(1, 8))]
        context = [rng.randrange(6) for _ in range(rng.randint(0, 4))]
        assert np.array_equal(v2.token_scores(toks, context, True, True), lm.token_scores(toks, context, True, True))


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: rewrite_as_version_3(d), None),  # loads: version 3 without masks
        (lambda d: _with_flags(rewrite_as_version_3(d), 4, set_=True), "unknown header flags"),
        (lambda d: _with_flags(d, 2, set_=False), "extension masks without pair bounds"),
        (lambda d: _with_offset(d, 320, 1 << 40), "extension masks"),
    ],
)
def test_binary_names_a_bad_extension_mask_header(tmp_path, edit, message):
    """The masks' flag in a version-3 file, the flag without pair bounds, and an offset outside the
    file are refused, naming the problem (checksum recomputed, as a forger would)."""
    from draftlattice import FormatError

    path = tmp_path / "m.arpa"
    random_arpa(path, 4, 704, n_words=5, consistent=True)
    NgramLM(path).save(tmp_path / "m.dlm")
    data = with_new_checksum(edit(bytearray((tmp_path / "m.dlm").read_bytes())))
    (tmp_path / "bad.dlm").write_bytes(bytes(data))
    if message is None:
        NgramLM(tmp_path / "bad.dlm")
        return
    with pytest.raises(FormatError, match=message):
        NgramLM(tmp_path / "bad.dlm")


def _with_flags(data: bytearray, flag: int, set_: bool) -> bytearray:
    flags = struct.unpack("<Q", data[288:296])[0]
    data[288:296] = struct.pack("<Q", flags | flag if set_ else flags & ~flag)
    return data


def _with_offset(data: bytearray, at: int, offset: int) -> bytearray:
    data[at : at + 8] = struct.pack("<Q", offset)
    return data


@pytest.mark.parametrize("section,value,message", [(304, float("nan"), "pair bound"), (312, -1.0, "backoff slack")])
def test_binary_rejects_a_nan_pair_bound_and_a_negative_slack(tmp_path, section, value, message):
    """A NaN bound would disable the search's pruning test, and a negative slack would make the
    absent-bigram bound too tight: a file holding either is refused (checksum recomputed)."""
    from draftlattice import FormatError

    path = tmp_path / "m.arpa"
    random_arpa(path, 3, 11, n_words=6, consistent=True)
    NgramLM(path).save(tmp_path / "m.dlm")
    data = bytearray((tmp_path / "m.dlm").read_bytes())
    offset = struct.unpack("<Q", data[section : section + 8])[0]
    assert offset > 0
    data[offset : offset + 4] = struct.pack("<f", value)
    (tmp_path / "bad.dlm").write_bytes(bytes(with_new_checksum(data)))
    with pytest.raises(FormatError, match=message):
        NgramLM(tmp_path / "bad.dlm")
