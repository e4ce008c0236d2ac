"""`draftlattice demo --json FILE`: the schema, the same numbers as the printed table, the texts,
and the CLI's overwrite policy (tiny random model over the shipped tokenizer and 2-gram LM)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from _demo_models import SMALL_RUN, tiny_demo_models
from draftlattice.assets import WIKITEXT_TEST, data_file
from draftlattice.cli.main import main
from draftlattice.decode import greedy_decode
from draftlattice.evaluate.prompts import paragraph_prompts
from draftlattice.model import BlockwiseLM
from draftlattice.tokenizer import load_tokenizer

SHIPPED = Path(__file__).resolve().parents[1] / "lm_models"
SIZES = [*SMALL_RUN, "--p", "3"]  # with the LM katz2.dlm


@pytest.fixture
def models(tmp_path) -> Path:
    return tiny_demo_models(tmp_path)


def table_rows(out: str) -> dict[str, list[str]]:
    """Printed table rows by name: the cells after the name."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("| drafter"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def check_schema(data: dict, names: list[str], prompts: int) -> None:
    assert set(data) >= {"rows", "outputs"}
    assert [row["name"] for row in data["rows"]] == names
    for row in data["rows"]:
        assert isinstance(row["block_efficiency"], float) and row["block_efficiency"] >= 1.0
        assert isinstance(row["tokens_per_s"], float) and row["tokens_per_s"] > 0
        assert row["tokens"] == 2 * 10 and row["serial_calls"] >= 2
        assert row["block_efficiency"] == pytest.approx(row["tokens"] / row["serial_calls"])
    assert len(data["outputs"]) == prompts and all(isinstance(text, str) and text for text in data["outputs"])


def test_greedy_json_matches_the_table_and_holds_the_greedy_texts(models, capsys):
    out_file = models / "demo.json"
    assert main(["demo", "--models", str(models), *SIZES, "--json", str(out_file)]) == 0
    out = capsys.readouterr().out
    data = json.loads(out_file.read_text(encoding="utf-8"))
    names = ["greedy", "vanilla", "ngram 1-best", "ngram 3-best", "oracle"]
    check_schema(data, names, prompts=2)
    printed = table_rows(out)
    for row in data["rows"]:
        cells = printed[row["name"]]  # settings, verifier, block efficiency, mean block, calls, tokens, ..., tokens/s
        assert cells[2] == f"{row['block_efficiency']:.3f}" and cells[5] == str(row["tokens"])
        assert cells[9] == f"{row['tokens_per_s']:.1f}"
        assert row["identical"] is True
    # The outputs are the target's own greedy continuations of the demo prompts.
    model = BlockwiseLM.from_pretrained(models / "default")
    tokenizer = load_tokenizer(models / "default" / "tokenizer.json")
    prompts = paragraph_prompts(data_file(WIKITEXT_TEST), tokenizer, 2, 12, spread=True)
    assert data["outputs"] == [tokenizer.decode(greedy_decode(model, p, 10)) for p in prompts]


def test_sampling_json_matches_the_table(models, capsys):
    out_file = models / "sampling.json"
    assert (
        main(
            [
                "demo",
                "--models",
                str(models),
                *SIZES,
                "--temperature",
                "0.8",
                "--json",
                str(out_file),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    data = json.loads(out_file.read_text(encoding="utf-8"))
    check_schema(data, ["vanilla", "ngram 1 draft", "ngram 3-best tree", "ngram 3 sampled"], prompts=2)
    assert data["sampling"]["temperature"] == 0.8
    printed = table_rows(out)
    base = data["rows"][0]
    for row in data["rows"]:
        cells = printed[row["name"]]  # settings, verifier, block efficiency, vs vanilla, tokens/s, vs vanilla
        assert cells[2] == f"{row['block_efficiency']:.3f}"
        assert cells[3] == f"{row['block_efficiency'] / base['block_efficiency']:.3f}"
        assert cells[4] == f"{row['tokens_per_s']:.1f}"


def test_json_output_follows_the_overwrite_policy(models, capsys):
    out_file = models / "demo.json"
    out_file.write_text("old")
    args = ["demo", "--models", str(models), *SIZES, "--json", str(out_file)]
    assert main(args) == 1
    assert re.search(r"demo\.json: exists \(use --force", capsys.readouterr().err)
    assert out_file.read_text() == "old"
    lm = models / "katz2.dlm"
    assert main([*args[:-1], str(lm), "--force"]) == 1
    assert "also an input" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    assert json.loads(out_file.read_text())["rows"][0]["name"] == "greedy"
    assert sorted(p.name for p in models.iterdir()) == ["default", "demo.json", "katz2.dlm"]
