"""`draftlattice trace record` / `trace info` / `eval` end to end on a tiny random model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from draftlattice import FormatError
from draftlattice.cli.main import main
from draftlattice.evaluate.drafting import Vanilla
from draftlattice.evaluate.replay import replay
from draftlattice.evaluate.trace import load_trace
from draftlattice.model import BlockwiseConfig, BlockwiseLM
from draftlattice.model.io import save_model

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    torch.manual_seed(0)
    config = BlockwiseConfig(
        vocab_size=4096, n_layer=1, n_head=2, d_model=32, d_ff=64, num_heads=3, max_seq_len=128, head_hidden=32
    )
    out = tmp_path_factory.mktemp("model")
    save_model(BlockwiseLM(config), out, tokenizer_path=ROOT / "lm_models" / "tokenizer.json")
    return out


def test_record_info_eval(model_dir, tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(
        "The tower is 324 metres tall, about the same height as an 81-storey building.\n"
        "= Heading =\n\nIn 1889 the exhibition opened in Paris and drew many visitors.\n"
    )
    trace_path = tmp_path / "t.dltrace"
    record = ["--prompts", str(prompts), "--prompt-tokens", "8", "--max-new-tokens", "12", "--top-k", "4"]
    assert main(["trace", "record", "--model", str(model_dir), *record, "-o", str(trace_path)]) == 0
    trace = load_trace(trace_path)
    assert len(trace) == 2 and trace.num_heads == 3 and trace.top_k == 4 and trace.num_positions == 24
    assert main(["trace", "info", str(trace_path)]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])["positions"] == 24
    out = tmp_path / "report"
    # the same small grid for both runs: k and p of the tables, the k and p curves
    grid = ["--trace", str(trace_path), "--lm", str(ROOT / "lm_models" / "katz2.dlm"), "--k", "4", "--p", "4"]
    grid += ["--ks", "1,4", "--ps", "1,4"]
    tuning = ["--tune-alpha", "--alphas", "0,1", "--heldout-fraction", "0.5"]
    page = tmp_path / "eval.html"
    assert main(["eval", *grid, *tuning, "-o", str(out), "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert "Table 4" in printed and "Table 3" in printed and "Table 5" in printed
    result = json.loads((out / "results.json").read_text())
    assert result["report_prompts"] == 1 and result["alpha"] in (0.0, 1.0)
    vanilla = replay(trace, Vanilla(), prompts=[1], progress=False).block_efficiency
    assert result["table4"]["baseline (vanilla)"] == pytest.approx(vanilla)
    assert (out / "figure6_oracle.png").stat().st_size > 1000
    html = page.read_text()  # the rows and the curves, no network needed to view it
    assert "baseline (vanilla)" in html and "not timed" in html and html.count("<svg") >= 3
    assert "Oracle" in html or "oracle" in html

    # Without matplotlib the results are still written; only the figures are skipped.
    bare = tmp_path / "no-matplotlib"
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
        assert main(["eval", *grid, "--alphas", "1", "-o", str(bare)]) == 0
    assert json.loads((bare / "results.json").read_text())["table4"] and (bare / "tables.txt").stat().st_size
    assert not (bare / "figure6_oracle.png").exists()


def test_damaged_trace_is_an_error(tmp_path, capsys):
    bad = tmp_path / "bad.dltrace"
    bad.write_bytes(b"DLTRACE\0" + b"\0" * 40)
    with pytest.raises(FormatError):
        load_trace(bad)
    assert main(["eval", "--trace", str(bad), "--lm", str(ROOT / "lm_models" / "katz2.dlm")]) == 1
    assert "trace" in capsys.readouterr().err
