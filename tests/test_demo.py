"""`draftlattice demo` runs in reduced form: with the shipped artifacts, and with a tiny model."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from draftlattice.assets import data_dir
from draftlattice.cli.main import main
from draftlattice.model import BlockwiseConfig, BlockwiseLM

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
    shipped = ROOT / "lm_models"
    torch.manual_seed(0)
    config = BlockwiseConfig(
        vocab_size=4096, n_layer=1, n_head=2, d_model=32, d_ff=64, num_heads=3, head_hidden=32, max_seq_len=128
    )
    BlockwiseLM(config).save_pretrained(tmp_path / "default", tokenizer_path=shipped / "tokenizer.json")
    BlockwiseLM(BlockwiseConfig(**{**config.to_dict(), "num_heads": 1})).save_pretrained(
        tmp_path / "neural_rescorer", tokenizer_path=shipped / "tokenizer.json"
    )
    shutil.copy(shipped / "katz2.dlm", tmp_path)
    code = main(
        [
            "demo",
            "--models",
            str(tmp_path),
            "--lm",
            "katz2.dlm",
            "--prompts",
            "2",
            "--prompt-tokens",
            "12",
            "--max-new-tokens",
            "10",
            "--k",
            "3",
            "--p",
            "4",
        ]
    )
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
