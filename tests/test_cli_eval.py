"""`draftlattice trace record` / `trace info` / `eval` (trace and live) end to end on a tiny target folder."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from _hf_models import greedy
from _tiny_target import tiny_target
from draftlattice import FormatError
from draftlattice.cli.main import main
from draftlattice.evaluate.drafting import Vanilla
from draftlattice.evaluate.replay import replay
from draftlattice.evaluate.trace import load_trace
from draftlattice.tokenizer import tokenizer_sha256

PROMPTS = (
    "The tower is 324 metres tall, about the same height as an 81-storey building.\n"
    "= Heading =\n\nIn 1889 the exhibition opened in Paris and drew many visitors.\n"
)
RECORD = ["--prompt-tokens", "8", "--max-new-tokens", "12", "--top-k", "4"]


@pytest.fixture(scope="module")
def target(tmp_path_factory, one_thread):
    return tiny_target(tmp_path_factory.mktemp("target"))


def test_record_info_eval(target, tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(PROMPTS)
    trace_path = tmp_path / "t.dltrace"
    model = ["--model", str(target.folder)]
    assert main(["trace", "record", *model, "--prompts", str(prompts), *RECORD, "-o", str(trace_path)]) == 0
    trace = load_trace(trace_path)
    assert len(trace) == 2 and trace.num_heads == 3 and trace.top_k == 4 and trace.num_positions == 24
    assert trace.meta["tokenizer_sha256"] == tokenizer_sha256(target.tokenizer)
    for prompt, tokens in zip(trace.prompts, trace.tokens):  # the recorded decode is the greedy one
        ids = torch.tensor([prompt.tolist()])
        assert greedy(target.model, ids, torch.ones_like(ids), max_new_tokens=12)[0, 8:].tolist() == tokens.tolist()
    assert main(["trace", "info", str(trace_path)]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])["positions"] == 24
    out = tmp_path / "report"
    # the same small grid for both runs: k and p of the tables, the k and p curves
    grid = ["--lm", str(target.lm), "--k", "4", "--p", "4", "--ks", "1,4", "--ps", "1,4"]
    tuning = ["--tune-alpha", "--alphas", "0,1", "--heldout-fraction", "0.5"]
    page = tmp_path / "eval.html"
    assert main(["eval", "--trace", str(trace_path), *grid, *tuning, "-o", str(out), "--html", str(page)]) == 0
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

    # Live: the same prompts recorded in memory give the same results as the trace file.
    live = tmp_path / "live"
    live_args = ["eval", "--live", *model, "--prompts", str(prompts), *RECORD, *grid, *tuning, "-o", str(live)]
    assert main(live_args) == 0
    assert json.loads((live / "results.json").read_text()) == result

    # Without matplotlib the results are still written; only the figures are skipped.
    bare = tmp_path / "no-matplotlib"
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
        assert main(["eval", "--trace", str(trace_path), *grid, "--alphas", "1", "-o", str(bare)]) == 0
    assert json.loads((bare / "results.json").read_text())["table4"] and (bare / "tables.txt").stat().st_size
    assert not (bare / "figure6_oracle.png").exists()


def test_model_needs_live(target, tmp_path, capsys):
    trace = tmp_path / "t.dltrace"
    trace.write_bytes(b"")
    assert main(["eval", "--trace", str(trace), "--model", str(target.folder), "--lm", str(target.lm)]) == 1
    assert "--live" in capsys.readouterr().err


def test_damaged_trace_is_an_error(target, tmp_path, capsys):
    bad = tmp_path / "bad.dltrace"
    bad.write_bytes(b"DLTRACE\0" + b"\0" * 40)
    with pytest.raises(FormatError):
        load_trace(bad)
    assert main(["eval", "--trace", str(bad), "--lm", str(target.lm)]) == 1
    assert "trace" in capsys.readouterr().err
