"""The CLI's overwrite policy (cli/_output.py): no silent clobbering, never an input as output."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from draftlattice.cli._output import check_output
from draftlattice.cli.main import main

ARPA = Path(__file__).resolve().parents[1] / "tools" / "fuzz" / "corpus" / "arpa" / "katz3.arpa"


def test_check_output(tmp_path):
    existing = tmp_path / "x.dlm"
    existing.write_text("old")
    with pytest.raises(FileExistsError, match="use --force"):
        check_output(existing)
    assert check_output(existing, force=True) == existing
    with pytest.raises(ValueError, match="also an input"):
        check_output(tmp_path / "sub" / ".." / "x.dlm", [existing], force=True)
    assert check_output(tmp_path / "new.dlm", [existing]) == tmp_path / "new.dlm"


def test_lm_compile_never_writes_over_its_input(tmp_path, capsys):
    arpa = tmp_path / "m.arpa"
    shutil.copyfile(ARPA, arpa)
    before = arpa.read_bytes()
    assert main(["lm", "compile", str(arpa), "-o", str(arpa), "--force"]) == 1
    assert "also an input" in capsys.readouterr().err
    assert arpa.read_bytes() == before
    out = tmp_path / "m.dlm"
    assert main(["lm", "compile", str(arpa), "-o", str(out)]) == 0
    assert main(["lm", "compile", str(arpa), "-o", str(out)]) == 1  # exists, no --force
    assert "use --force" in capsys.readouterr().err
    assert main(["lm", "compile", str(arpa), "-o", str(out), "--force"]) == 0


def test_lm_build_and_tokenizer_refuse_their_inputs(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\nthe dog sat\n")
    assert main(["lm", "build", str(corpus), "--order", "2", "-o", str(corpus), "--force"]) == 1
    assert main(["tokenizer", "train", str(corpus), "--vocab-size", "300", "-o", str(corpus), "--force"]) == 1
    assert corpus.read_text() == "the cat sat\nthe dog sat\n"
    assert capsys.readouterr().err.count("also an input") == 2
