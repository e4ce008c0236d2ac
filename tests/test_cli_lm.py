"""`draftlattice lm info|score|compile`."""

from __future__ import annotations

import json
import math

import pytest

from draftlattice import NgramLM
from draftlattice.cli.main import main
from test_ngram_errors import GOOD


@pytest.fixture
def arpa(tmp_path):
    path = tmp_path / "model.arpa"
    path.write_text("# origin: unit test\n" + GOOD, encoding="utf-8")
    return path


def test_info_text_and_json(arpa, capsys):
    assert main(["lm", "info", str(arpa)]) == 0
    out = capsys.readouterr().out
    assert "order: 2" in out and "2-grams: 2" in out and "origin: unit test" in out
    assert main(["lm", "info", str(arpa), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"] == [4, 2] and info["vocab_size"] == 4 and info["format"] == "arpa"
    assert info["metadata"] == {"origin": "unit test"}


def test_score_words_ids_and_file(arpa, tmp_path, capsys):
    lm = NgramLM(arpa)
    assert main(["lm", "score", str(arpa), "1 2", "--bos", "--eos"]) == 0
    rows = capsys.readouterr().out.splitlines()
    logprob, perplexity, tokens, unknown, text = rows[1].split("\t")
    expected = lm.score([1, 2], bos=True, eos=True)
    assert float(logprob) == pytest.approx(expected, abs=1e-5)
    assert float(perplexity) == pytest.approx(math.exp(-expected / 3), rel=1e-4)
    assert (tokens, unknown, text) == ("3", "0", "1 2")
    lines = tmp_path / "lines.txt"
    lines.write_text("1 2\n2 zzz\n", encoding="utf-8")
    assert main(["lm", "score", str(arpa), "--file", str(lines), "--ids"]) == 1  # 'zzz' not an id
    assert "zzz" in capsys.readouterr().err
    assert main(["lm", "score", str(arpa), "--file", str(lines)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[2].split("\t")[3] == "1" and "(all 2 lines)" in rows[3]
    assert float(rows[2].split("\t")[0]) == pytest.approx(lm.score([2, 1000]), abs=1e-5)


def test_compile_refuses_overwrite_without_force(arpa, tmp_path, capsys):
    out = tmp_path / "model.dlm"
    assert main(["lm", "compile", str(arpa), "-o", str(out)]) == 0
    assert NgramLM(out).score([1, 2], bos=True) == NgramLM(arpa).score([1, 2], bos=True)
    assert main(["lm", "compile", str(arpa), "-o", str(out)]) == 1
    assert "exists" in capsys.readouterr().err
    assert main(["lm", "compile", str(arpa), "-o", str(out), "--force"]) == 0


def test_bad_file_is_an_error_not_a_crash(tmp_path, capsys):
    bad = tmp_path / "bad.arpa"
    bad.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1\ta\n\n\\end\\\n", encoding="utf-8")
    assert main(["lm", "info", str(bad)]) == 1
    assert "bad.arpa:6: section \\1-grams: has 1 entries but the header says 2" in capsys.readouterr().err
