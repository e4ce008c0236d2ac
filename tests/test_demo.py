"""`draftlattice demo` runs in reduced form: with the shipped artifacts, and with a tiny model."""

from __future__ import annotations

import shutil
from pathlib import Path

from _demo_models import SMALL_RUN, tiny_demo_models
from draftlattice.assets import data_dir
from draftlattice.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
ROWS = ("| greedy |", "| vanilla |", "| ngram 1-best |", "| ngram 4-best |", "| oracle |")


def test_demo_with_the_shipped_model(capsys):
    default = ROOT / "lm_models" / "default"
    assert (default / "config.json").is_file(), (
        f"the shipped default model is missing: {default} (rebuild it with lm_models/build_model_blockwise.sh)"
    )
    assert data_dir().is_dir()
    assert main(["demo", "--quick"]) == 0
    out = capsys.readouterr().out
    for row in ROWS:
        assert row in out
    assert "identical to greedy decoding of the target" in out
    assert "| NO |" not in out


def test_demo_plumbing_with_a_tiny_model(tmp_path, capsys):
    """The same command on a random tiny model over the shipped tokenizer and 4-gram LM."""
    models = tiny_demo_models(tmp_path, neural=True)
    code = main(["demo", "--models", str(models), *SMALL_RUN, "--p", "4"])
    out = capsys.readouterr().out
    assert code == 0, out
    for row in (*ROWS, "| neural |"):
        assert row in out
    assert "Checked: all 10 blockwise outputs (5 drafters x 2 prompts)" in out


def test_demo_names_a_missing_model_directory(tmp_path, capsys):
    assert main(["demo", "--quick", "--models", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "not found" in err and str(tmp_path / "katz4.dlm") in err
    shutil.copy(ROOT / "lm_models" / "katz2.dlm", tmp_path / "katz4.dlm")
    assert main(["demo", "--quick", "--models", str(tmp_path)]) == 1
    assert str(tmp_path / "default") in capsys.readouterr().err
