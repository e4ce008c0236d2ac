"""The demo's report without the model: how far a drafted row agrees with generate(), in the
printed table, the JSON and the HTML report's rows and notes."""

from __future__ import annotations

import pytest

from draftlattice.apps.demo import DemoSettings, Row, RowSpec
from draftlattice.apps.demo_html import html_run
from draftlattice.apps.demo_prompts import DemoPrompt, demo_prompts
from draftlattice.apps.demo_report import DemoReport
from draftlattice.report import validate_run


def _report(dtype: str, drafted: list[list[int]]) -> DemoReport:
    reference = Row(RowSpec("generate", "", "-", {}), outputs=[[1, 2, 3, 4], [5, 6, 7, 8]], calls=8, seconds=1.0)
    row = Row(RowSpec("ngram_tree", "k=8", "tree", {}), outputs=drafted, calls=5, seconds=0.8, accepted=[1, 2])
    row.agreeing = sum(a == b for a, b in zip(drafted, reference.outputs))
    row.identical = row.agreeing == len(reference.outputs)
    prompts = [DemoPrompt("text", "one", [0]), DemoPrompt("chat", "two", [0])]
    return DemoReport(DemoSettings(), prompts, [reference, row], lambda ids: " ".join(map(str, ids)), "m", "lm", dtype)


def test_agreement_counts_outputs_and_the_tokens_before_each_first_difference():
    report = _report("bfloat16", [[1, 2, 3, 4], [5, 6, 9, 9]])
    assert report.agreement(report.rows[1]) == (1, 2, 6, 8)
    assert "1/2, 75% of tokens" in report.table()
    assert report.to_json()["rows"][1]["agreeing_tokens"] == [6, 8]
    line = report.identity_line()
    assert line.startswith("1 of 2 drafted outputs equal generate()'s, and 75% of their tokens")
    assert "--dtype float32" in line


def test_the_html_run_shows_agreement_in_reduced_precision_and_identity_in_float32():
    run = validate_run(html_run(_report("bfloat16", [[1, 2, 3, 4], [5, 6, 9, 9]]), {}, str))
    assert run["rows"][1]["identical"] is False
    assert run["rows"][1]["agreement"] == {"outputs": (1, 2), "tokens": (6, 8)}
    assert "rounds differently" in run["notes"][0] and "float32" in run["notes"][0]
    run = validate_run(html_run(_report("float32", [[1, 2, 3, 4], [5, 6, 7, 8]]), {}, str))
    assert run["rows"][1]["identical"] is True
    assert run["notes"] == ["float32: every drafted output is token for token generate()'s (checked)."]


def test_rows_on_the_lean_step_are_said_to_equal_the_lean_row_not_generate():
    generate = Row(RowSpec("generate", "", "-", {}), outputs=[[1, 2, 3, 4], [5, 6, 7, 8]], calls=8, seconds=1.0)
    lean = Row(RowSpec("lean", "int4", "-", {}), outputs=[[1, 2, 3, 9], [5, 6, 7, 8]], calls=8, seconds=0.2)
    row = Row(
        RowSpec("ngram", "k=8", "chain", {}, reference="lean"), outputs=lean.outputs, calls=5, seconds=0.1, accepted=[1]
    )
    row.agreeing, row.identical = 2, True
    prompts = [DemoPrompt("text", "one", [0]), DemoPrompt("chat", "two", [0])]
    report = DemoReport(DemoSettings(), prompts, [generate, lean, row], str, "m", "lm", "bfloat16")
    note = report.agreement_note()
    assert "its reference's (lean" in note and "generate()'s" not in note


@pytest.mark.parametrize("bad", [-1, True, 2.5])
def test_demo_settings_name_a_bad_retrieval_branch(bad):
    with pytest.raises(ValueError, match=f"retrieval must be an int >= 0, got {bad!r}"):
        DemoSettings(retrieval=bad)


class _Tokenizer:
    """What demo_prompts asks of a tokenizer: a chat template and plain encoding."""

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        return [len(m["content"]) for m in messages]

    def __call__(self, text, add_special_tokens):
        return {"input_ids": [len(word) for word in text.split()]}


def test_chat_prompts_alone_need_no_wikitext_file():
    prompts = demo_prompts(_Tokenizer(), None, chat=2, text=0)
    assert [p.kind for p in prompts] == ["chat", "chat"]
    with pytest.raises(ValueError, match="2 text prompts need a WikiText-2 raw test file"):
        demo_prompts(_Tokenizer(), None, chat=1, text=2)
