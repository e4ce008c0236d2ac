"""Bad inputs to `rescore`, `lattice show`, `lm`, `tokenizer train` and the distilled-corpus reader:
one line naming the file or option and what was expected, never a traceback, a silent empty
result or a process abort (an audit's findings, one test or more each)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import draftlattice as dl
from _cli_errors import one_line_error
from arpa_writer import random_arpa
from draftlattice import _core
from draftlattice.cli.main import main
from draftlattice.distilled_corpus import DistilledCorpus, write_shard
from draftlattice.ngram import FormatError
from draftlattice.ngram.build import TOKENIZER_SHA256_KEY
from draftlattice.tokenizer import train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
TOPK = ROOT / "examples" / "wt2_lattice.npz"
NON_UTF8_ARPA = b"\\data\\\nngram 1=4\n\n\\1-grams:\n-1\t<s>\n-1\t</s>\n-1\tcaf\xe9\n-1\tfoo\n\n\\end\\\n"


@pytest.fixture()
def lm_path(tmp_path):
    path = tmp_path / "m.arpa"
    random_arpa(path, 2, seed=3, n_words=6, with_unk=True)
    return path


@pytest.fixture()
def topk(tmp_path):
    path = tmp_path / "t.npz"
    np.savez(path, tokens=np.array([[0, 1], [2, 3]]), logprobs=np.array([[-0.1, -2.0], [-0.5, -1.0]]))
    return path


def _rescore(*extra, topk: Path, lm: Path) -> list[str]:
    return ["rescore", "--topk", str(topk), "--lm", str(lm), *map(str, extra)]


# 1. An .npy where a top-k .npz is expected (np.load returns an array, not an archive).


def test_topk_given_an_npy_says_what_it_is(tmp_path, lm_path, capsys):
    np.save(tmp_path / "lg.npy", np.zeros((4, 100), np.float32))
    line = one_line_error(["rescore", "--topk", str(tmp_path / "lg.npy"), "--lm", str(lm_path)], capsys)
    assert "lg.npy" in line and "NumPy array (.npy)" in line and "top-k .npz" in line


def test_lattice_show_of_an_npy_not_named_npy(tmp_path, capsys):
    np.save(tmp_path / "lg.npy", np.zeros((4, 100), np.float32))
    (tmp_path / "lg.npy").rename(tmp_path / "lg.dat")
    line = one_line_error(["lattice", "show", str(tmp_path / "lg.dat"), "-o", str(tmp_path / "x.dot")], capsys)
    assert "lg.dat" in line and "NumPy array (.npy)" in line and "top-k .npz" in line
    assert not (tmp_path / "x.dot").exists()


# 2. An .npz where logits .npy are expected.


def test_logits_given_an_npz_says_what_it_is(lm_path, capsys):
    line = one_line_error(["rescore", "--logits", str(TOPK), "-k", "4", "--lm", str(lm_path)], capsys)
    assert "wt2_lattice.npz" in line and "zip archive" in line and "logits .npy" in line


# 3. tokenizer train: --vocab-size bounded before the trainer runs, --min-frequency >= 1.


@pytest.mark.parametrize("size", ["99999999999", "2147483647", "4294967296"])
def test_tokenizer_train_refuses_a_huge_vocab_size_and_leaves_nothing(tmp_path, capsys, size):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\n" * 20)
    line = one_line_error(
        ["tokenizer", "train", str(corpus), "--vocab-size", size, "-o", str(tmp_path / "x.json")], capsys
    )
    assert f"vocab_size {size} too large" in line and "at most" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]  # no x.json, no .x.json.*.tmp


@pytest.mark.parametrize("frequency", ["-1", "0", str(1 << 64)])
def test_tokenizer_train_refuses_a_min_frequency_below_one(tmp_path, capsys, frequency):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\n" * 20)
    argv = ["tokenizer", "train", str(corpus), "--min-frequency", frequency, "-o", str(tmp_path / "x.json")]
    line = one_line_error(argv, capsys)
    assert "min_frequency must be an integer in [1, 2**64)" in line and frequency in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


# 4. A distilled corpus with a damaged shard: FormatError naming the shard, from the reader.


def _corpus(folder: Path) -> Path:
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps({"format": "draftlattice-distilled", "version": 1}))
    write_shard(folder / "shard-00000.npz", [(np.arange(10, dtype=np.int32), 3), (np.arange(7, dtype=np.int32), 2)])
    return folder


def test_distilled_corpus_reads_a_good_shard(tmp_path):
    corpus = DistilledCorpus.load(_corpus(tmp_path / "c"))
    assert len(corpus) == 2 and corpus.record(1).tolist() == list(range(7)) and corpus.generated_tokens == 12


def test_truncated_shard_is_one_line_naming_it(tmp_path, capsys):
    folder = _corpus(tmp_path / "c")
    shard = folder / "shard-00000.npz"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(FormatError, match="shard-00000.npz: damaged"):
        DistilledCorpus.load(folder)
    line = one_line_error(["hf", "datastore", str(folder), "-o", str(tmp_path / "ds.npz")], capsys)
    assert "shard-00000.npz" in line and "damaged" in line
    assert not (tmp_path / "ds.npz").exists()


def test_shard_without_offsets_is_one_line_naming_it(tmp_path, capsys):
    folder = _corpus(tmp_path / "c")
    np.savez(folder / "shard-00000.npz", tokens=np.arange(5, dtype=np.int32), prompt_lens=np.array([1], np.int32))
    line = one_line_error(["hf", "datastore", str(folder), "-o", str(tmp_path / "ds.npz")], capsys)
    assert "shard-00000.npz" in line and "missing array(s) offsets" in line


def test_shard_whose_offsets_disagree_with_its_tokens(tmp_path):
    folder = _corpus(tmp_path / "c")
    tokens, prompt_lens = np.arange(5, dtype=np.int32), np.array([1], np.int32)
    np.savez(folder / "shard-00000.npz", tokens=tokens, offsets=np.array([0, 9]), prompt_lens=prompt_lens)
    with pytest.raises(FormatError, match="shard-00000.npz: arrays disagree"):
        DistilledCorpus.load(folder)


# 5. alpha so large that alpha * LM log-prob overflows to -inf: refused, not "drafts": [].


def test_rescore_refuses_an_alpha_that_overflows(topk, lm_path, capsys):
    line = one_line_error(_rescore("--alpha", "1e307", topk=topk, lm=lm_path), capsys)
    assert "alpha must be finite and >= 0, at most 1e+06" in line and "1e+307" in line


def test_alpha_bound_in_the_api(lm_path):
    lm = dl.NgramLM(lm_path)
    lattice = dl.Lattice.from_topk(np.array([[0, 1], [2, 3]]), np.array([[-0.1, -2.0], [-0.5, -1.0]]))
    with pytest.raises(ValueError, match="at most 1e\\+06"):
        dl.rescore(lattice, lm, p=2, alpha=1e307)
    with pytest.raises(ValueError, match="at most 1e\\+06"):
        dl.rescore_batch([lattice], lm, p=2, alpha=1e6 * 1.5)
    result = dl.rescore(lattice, lm, p=4, alpha=1e6)  # the largest alpha: finite totals, every draft
    assert len(result) == 4 and np.isfinite(result.scores).all()


# 6. An ARPA word that is not UTF-8: refused at load with the file and line.


def test_non_utf8_arpa_word_is_refused_at_load_with_its_line(tmp_path, capsys):
    arpa = tmp_path / "nonutf.arpa"
    arpa.write_bytes(NON_UTF8_ARPA)
    for argv in (
        ["lm", "info", str(arpa)],
        ["lm", "compile", str(arpa), "-o", str(tmp_path / "x.dlm")],
        ["lm", "score", str(arpa), "foo"],
        ["rescore", "--topk", str(TOPK), "--lm", str(arpa)],
    ):
        line = one_line_error(argv, capsys)
        assert f"{arpa}:7: not valid UTF-8" in line and "caf\\xe9" in line, line
    assert not (tmp_path / "x.dlm").exists()


def test_non_utf8_word_of_a_binary_lm_names_the_file(tmp_path, capsys):
    arpa, dlm = tmp_path / "nonutf.arpa", tmp_path / "nonutf.dlm"
    arpa.write_bytes(NON_UTF8_ARPA)
    _core.NgramLM(str(arpa), str(arpa), None, -1000.0, False).save(str(dlm), False)  # as an older release wrote it
    line = one_line_error(["lm", "score", str(dlm), "foo"], capsys)
    assert f"{dlm}: holds an LM word or metadata that is not valid UTF-8" in line and "caf\\xe9" in line
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("foo\n")
    line = one_line_error(["rescore", "--topk", str(TOPK), "--lm", str(dlm), "--vocab", str(vocab)], capsys)
    assert f"{dlm}: holds an LM word or metadata that is not valid UTF-8" in line


# 7. lm score suggests --allow-mismatch: it has the option.


@pytest.fixture()
def tokenizer_lm(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\n" * 20)
    train_tokenizer([corpus], 300, tmp_path / "tok.json")
    lm = tmp_path / "tok.arpa"
    random_arpa(lm, 2, seed=5, n_words=300, with_unk=True, metadata={TOKENIZER_SHA256_KEY: "0" * 64})
    return tmp_path / "tok.json", lm


def test_lm_score_allow_mismatch(tokenizer_lm, capsys):
    tokenizer, lm = tokenizer_lm
    argv = ["lm", "score", str(lm), "the cat", "--tokenizer", str(tokenizer)]
    assert "pass --allow-mismatch" in one_line_error(argv, capsys)
    assert main([*argv, "--allow-mismatch"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("logprob_ln") and out[1].endswith("\tthe cat")


def test_lm_score_allow_mismatch_needs_a_tokenizer(lm_path, capsys):
    line = one_line_error(["lm", "score", str(lm_path), "--ids", "1 2", "--allow-mismatch"], capsys)
    assert "--allow-mismatch applies only with --tokenizer" in line


def test_lm_score_refuses_a_tokenizer_file_that_is_none(tokenizer_lm, tmp_path, capsys):
    _, lm = tokenizer_lm
    (tmp_path / "random.bin").write_bytes(bytes(range(256)) * 4)
    argv = ["lm", "score", str(lm), "the cat", "--tokenizer", str(tmp_path / "random.bin"), "--allow-mismatch"]
    assert "random.bin: not a valid tokenizer.json" in one_line_error(argv, capsys)


# 8. Errors name the file or option; offsets count from the start of the file.


def test_lm_score_non_utf8_file_and_vocab_are_named(tmp_path, lm_path, capsys):
    bad = tmp_path / "nonutf8.txt"
    bad.write_bytes(b"the cat\ncaf\xe9 au lait\n")
    line = one_line_error(["lm", "score", str(lm_path), "--file", str(bad)], capsys)
    assert f"{bad}: not a UTF-8 text file" in line and "line 2, byte offset 11" in line
    line = one_line_error(["lm", "score", str(lm_path), "--ids", "1", "--vocab", str(bad)], capsys)
    assert f"{bad}: is a binary file of unknown kind, expected a UTF-8 text file" in line  # judged on its head


def test_vocab_offset_counts_from_the_start_of_the_file(tmp_path, topk, lm_path, capsys):
    vocab = tmp_path / "vocab.txt"
    good = b"".join(b"word%d\n" % i for i in range(40000))
    vocab.write_bytes(good + b"caf\xe9\n")
    line = one_line_error(_rescore("--vocab", vocab, topk=topk, lm=lm_path), capsys)
    assert f"line 40001, byte offset {len(good) + 3}" in line


def test_vocab_lines_as_open_reads_them(tmp_path, topk, lm_path, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"0\r\n1\r\n2\n3\n4\n5")  # CRLF and a last line without newline
    assert main(_rescore("--vocab", vocab, "-p", "1", topk=topk, lm=lm_path)) == 0
    draft = json.loads(capsys.readouterr().out)["drafts"][0]
    assert draft["words"] == [str(t) for t in draft["tokens"]]


def test_context_that_is_not_token_ids_names_context(topk, lm_path, capsys):
    line = one_line_error(_rescore("--context", "1 2 --3", topk=topk, lm=lm_path), capsys)
    assert "--context" in line and "'--3' is not a token id" in line


@pytest.mark.parametrize("content", [bytes(range(256)) * 8, b"\\data\\\nngram 1=1\n"], ids=["random", "arpa"])
def test_topk_of_another_kind_says_it_is_not_an_npz(tmp_path, lm_path, capsys, content):
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    line = one_line_error(["rescore", "--topk", str(path), "--lm", str(lm_path)], capsys)
    assert "bad.npz: is " in line and "expected a top-k .npz archive" in line and "allow_pickle" not in line


def test_logits_value_errors_name_the_file(tmp_path, lm_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.int64))
    line = one_line_error(["rescore", "--logits", str(tmp_path / "x.npy"), "-k", "2", "--lm", str(lm_path)], capsys)
    assert f"{tmp_path / 'x.npy'}: logits must be float16" in line


# 9. Flags without effect in --topk mode, and NaN/inf temperatures, are refused.


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--temperature", "nan"], "--temperature must be a finite number > 0, got nan"),
        (["--temperature", "inf"], "--temperature must be a finite number > 0, got inf"),
        (["-k", "0"], "-k 0 applies to logits only"),
        (["-k", "4"], "-k 4 applies to logits only"),
        (["--temperature", "2"], "--temperature 2.0 applies to logits only"),
    ],
)
def test_topk_refuses_flags_without_effect(topk, lm_path, capsys, extra, expected):
    assert expected in one_line_error(_rescore(*extra, topk=topk, lm=lm_path), capsys)


def test_logits_refuse_a_nan_temperature(tmp_path, lm_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.float32))
    argv = ["rescore", "--logits", str(tmp_path / "x.npy"), "-k", "2", "--lm", str(lm_path), "--temperature", "nan"]
    assert "--temperature must be a finite number > 0, got nan" in one_line_error(argv, capsys)
