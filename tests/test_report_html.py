"""The HTML report (draftlattice.report): page structure, escaping, input validation, the write
policy, and the page in headless Chromium (screenshot and DOM after its script ran)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import draftlattice
from draftlattice.report import render_html, validate_run, visible, write_html_report
from draftlattice.report.browser import dump_dom, find_chromium, screenshot
from draftlattice.report.charts import line_chart
from png_pixels import png_pixels
from report_fixtures import SCRIPT, parse_html, synthetic_run

ROOT = Path(__file__).resolve().parents[1]

# --- (a) structure ---------------------------------------------------------------------------


def test_page_structure_text_spans_charts_and_step_data():
    run = synthetic_run()
    doc = parse_html(render_html(run))
    assert doc.find("head").find("title").text == run["title"]
    assert len(doc.find("details", cls="settings").find_all("tr")) == 4
    assert [tr.find("th").text for tr in doc.find("table", cls="rows").find("tbody").find_all("tr")] == [
        "vanilla",
        "ngram p-best",
    ]
    charts = doc.find_all("svg", cls="chart")
    titles = [svg.children[0].text for svg in charts]
    assert titles == [
        "Block efficiency (tokens per serial call)",
        "Tokens per second",
        "vanilla",
        "ngram p-best",
        "Oracle draft in the top-k lattice",
        "p best drafts verified",
    ]
    assert all(len(svg.find_all("rect", cls="bar")) == 2 for svg in charts[:2])
    assert all(len(svg.find_all("rect", cls="bar")) == 3 for svg in charts[2:4])  # accepted 0, 1, 2
    assert [len(svg.find_all("circle")) for svg in charts[4:]] == [4, 3]

    assert len(doc.find("select", id="prompt-select").find_all("option")) == 2
    assert [t.attrs["data-row"] for t in doc.find_all("button", cls="tab")] == ["0", "1"]
    for i, prompt in enumerate(run["prompts"]):
        for r, row in enumerate(run["rows"]):
            panel = doc.find("div", cls="panel", id=f"panel-p{i}-r{r}")
            assert ("hidden" in panel.attrs) == ((i, r) != (0, 0))
            steps = prompt["runs"][row["name"]]["steps"]
            spans = panel.find_all("span", cls="tok")
            assert panel.find("span", cls="prompt-text").text == prompt["prompt"]
            assert "".join(s.text for s in spans) == "".join(t for st in steps for t in st["committed"])
            expected = [
                (str(j), f"s{j % 2}", "own" if n < len(st["committed"]) - st["accepted"] else "acc")
                for j, st in enumerate(steps)
                for n in range(len(st["committed"]))
            ]
            assert [(s.attrs["data-step"], s.classes[1], s.classes[2]) for s in spans] == expected
    assert doc.find("aside", id="step-detail")


def test_agreement_column_says_identical_or_how_far_outputs_agree_and_notes_say_why():
    run = synthetic_run()
    run["rows"][1].update(identical=False, agreement={"outputs": [1, 2], "tokens": [90, 120]})
    run["notes"] = ["In bfloat16 <verification> rounds differently."]
    doc = parse_html(render_html(run))
    cells = [tr.find_all("td")[-1] for tr in doc.find("table", cls="rows").find("tbody").find_all("tr")]
    assert [c.text for c in cells] == ["identical", "1/2 outputs, 75% of tokens"]
    assert "90 of its 120 tokens" in cells[1].attrs["title"]
    assert [p.text for p in doc.find_all("p", cls="note")] == run["notes"]  # escaped, shown as text
    run["rows"][1].pop("agreement")
    assert parse_html(render_html(run)).find("table", cls="rows").find_all("td")[-1].text == "differs"
    assert ">NO<" not in render_html(run)


def test_step_data_island_holds_lattices_and_drafts_in_display_form():
    doc = parse_html(render_html(synthetic_run()))
    island = doc.find("script", id="run-data")
    assert island.attrs["type"] == "application/json"
    panels = json.loads(island.text)["panels"]
    assert sorted(panels) == ["p0-r0", "p0-r1", "p1-r0", "p1-r1"]
    step = panels["p0-r1"][1]  # committed " upon" (own), " the", " cat" (accepted)
    assert step["committed"] == ["·upon", "·the", "·cat"] and (step["own"], step["accepted"]) == (1, 2)
    assert [[cell[0] for cell in column] for column in step["lattice"]] == [
        ["·the", "·a", "↵"],
        ["·cat", "·dog", "⇥&x"],
    ]
    assert step["lattice"][0][0][1] == pytest.approx(0.61)
    assert step["path"] == [0, 0]
    assert step["after"][0] == ["·the", "·cat"] and (step["chosen"], step["chosen_in"], step["before_rank"]) == (
        0,
        "after",
        1,
    )
    last = panels["p0-r1"][2]  # accepted "\n" from drafts_after[1]; head 3's " cat" was not accepted
    assert last["path"] == [2, -1] and last["before_rank"] == 0
    assert panels["p0-r0"][0]["lattice"] is None and panels["p0-r0"][0]["path"] is None
    vanilla = panels["p0-r0"][1]  # no rescoring: chosen indexes drafts_before
    assert (vanilla["chosen_in"], vanilla["before_rank"], vanilla["after"]) == ("before", 0, None)


def test_page_is_self_contained_and_its_csp_admits_only_its_own_script_and_style():
    page = render_html(synthetic_run())
    doc = parse_html(page)
    assert not [e.tag for e in doc.iter() if {"src", "href", "srcset", "action"} & set(e.attrs)]
    assert not doc.find_all("link") and not doc.find_all("iframe")
    assert "url(" not in doc.find("style").text and "@import" not in doc.find("style").text
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * 6  # SVG namespaces only
    csp = doc.find("meta", http_equiv="Content-Security-Policy").attrs["content"]
    assert csp.startswith("default-src 'none';")
    script = [s for s in doc.find_all("script") if "type" not in s.attrs]
    assert len(script) == 1
    for body in (script[0].text, doc.find("style").text):
        assert f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'" in csp


def test_visible_whitespace_and_control_characters():
    assert visible(" the") == "·the"
    assert visible("\n\n") == "↵↵"
    assert visible("\tx\r") == "⇥x␍"
    assert visible("") == "∅"
    assert visible("a\x00b\u2003\u00a0") == "a\\x00b\\u2003⍽"
    assert visible("é\ufffd<b>") == "é\ufffd<b>"  # escaping is the page's job, not visible()'s


def test_line_chart_uses_a_log_axis_for_powers_of_two_and_round_y_ticks():
    svg = parse_html(line_chart("t", {"a": [(1, 1.2), (2, 2.0), (16, 3.3)]}, "k", "be"))
    ticks = [t.text for t in svg.find_all("text", cls="tick")]
    assert ticks == ["0", "1", "2", "3", "4", "1", "2", "16"]  # y: steps of 1 up to 4 >= 3.3; x: the data
    assert "k (log scale)" in [t.text for t in svg.find_all("text", cls="axis")]
    xs = [float(p.split(",")[0]) for p in svg.find("polyline").attrs["points"].split()]
    assert xs[1] - xs[0] == pytest.approx((xs[2] - xs[0]) / 4, abs=0.2)  # log2: 1 -> 2 is a quarter of 1 -> 16


# --- (b) escaping ----------------------------------------------------------------------------


def test_script_in_prompt_token_title_and_names_shows_as_text_and_never_as_an_element():
    run = synthetic_run()
    run["title"] = SCRIPT
    run["model"] = '"><img src=x onerror=alert(1)>'
    run["settings"][SCRIPT] = SCRIPT
    run["rows"][1]["name"] = "ngram </script><script>alert(2)</script>"
    prompts = run["prompts"]
    prompts[0]["runs"][run["rows"][1]["name"]] = prompts[0]["runs"].pop("ngram p-best")
    prompts[1]["runs"][run["rows"][1]["name"]] = prompts[1]["runs"].pop("ngram p-best")
    page = render_html(run)
    assert "<script>alert" not in page and "<img" not in page
    doc = parse_html(page)
    assert len(doc.find_all("script")) == 2 and not doc.find_all("img")
    assert doc.find("head").find("title").text == SCRIPT and doc.find("h1").text == SCRIPT
    assert run["model"] in doc.find("p", cls="model").text
    hostile = doc.find("div", id="panel-p1-r0")
    assert SCRIPT in hostile.find("span", cls="prompt-text").text
    assert [s.text for s in hostile.find_all("span", cls="tok")][0] == SCRIPT
    assert SCRIPT in doc.find("select", id="prompt-select").find_all("option")[1].text
    island = doc.find("script", id="run-data").text
    assert "<" not in island and ">" not in island and "&" not in island
    assert json.loads(island)["panels"]["p1-r1"][2]["after"][0][0] == SCRIPT


# --- validation and writing ------------------------------------------------------------------


def _step(run, prompt=0, row="ngram p-best", index=1):
    return run["prompts"][prompt]["runs"][row]["steps"][index]


BAD_RUNS = [
    (lambda r: r.pop("model"), r"run: missing model"),
    (lambda r: r.update(colour="red"), r"run: unknown key\(s\) colour"),
    (lambda r: r.update(rows=[]), r"run.rows: at least one row"),
    (lambda r: r["rows"][1].update(name="vanilla"), r"run.rows: the name 'vanilla' is used twice"),
    (
        lambda r: r["rows"][0].update(block_efficiency=float("nan")),
        r"run.rows\[0\].block_efficiency: expected a finite",
    ),
    (lambda r: r["rows"][0].update(identical="yes"), r"run.rows\[0\].identical: expected true, false or null"),
    (lambda r: r["rows"][0]["accepted_histogram"].update({"x": 1}), r"accepted_histogram key: expected a non-negative"),
    (lambda r: r["settings"].update(f=object()), r"run.settings\['f'\]: not JSON-able"),
    (lambda r: r["prompts"][0]["runs"].update(oracle={"steps": []}), r"'oracle' is not one of the rows"),
    (lambda r: _step(r).update(accepted=4), r"steps\[1\].accepted: 4 exceeds the 3 committed tokens"),
    (lambda r: _step(r).update(committed=[]), r"steps\[1\].committed: a step commits at least one token"),
    (lambda r: _step(r).update(chosen=3), r"steps\[1\].chosen: 3 is out of range \(drafts_after is 3 drafts\)"),
    (lambda r: _step(r).update(chosen=1), r"chosen: drafts_after\[1\] = \[' the', ' dog'\] does not start with"),
    (lambda r: _step(r)["lattice"][1].append([" x", 1.5]), r"lattice\[1\]\[3\] probability: 1.5 exceeds 1"),
    (lambda r: _step(r)["lattice"][0].__setitem__(0, [" x"]), r"lattice\[0\]\[0\]: expected \[token, probability\]"),
    (lambda r: _step(r).update(drafts_before=[[" a", 3]]), r"drafts_before\[0\]\[1\]: expected a string"),
    (lambda r: r["curves"].update(pbest=[[1, 2, 3]]), r"run.curves.pbest\[0\]: expected \[x, value\]"),
    (
        lambda r: r["rows"][1].update(agreement={"outputs": [3, 2], "tokens": [1, 1]}),
        r"run.rows\[1\].agreement.outputs: 3 agreeing of 2 compared",
    ),
    (lambda r: r["rows"][1].update(agreement={"outputs": [1, 2]}), r"run.rows\[1\].agreement: missing tokens"),
    (lambda r: r.update(notes=[1]), r"run.notes\[0\]: expected a string"),
]


@pytest.mark.parametrize("spoil, message", BAD_RUNS)
def test_bad_runs_are_refused_naming_the_field(spoil, message):
    run = synthetic_run()
    spoil(run)
    with pytest.raises(ValueError, match=message):
        render_html(run)


def test_validation_normalises_json_keys_and_numpy_scalars():
    out = validate_run(json.loads(json.dumps(synthetic_run())))
    assert out["rows"][1]["accepted_histogram"] == {0: 1, 1: 1, 2: 1}
    run = synthetic_run()
    run["rows"][0]["block_efficiency"] = np.float32(1.5)
    _step(run)["accepted"] = np.int64(2)
    assert validate_run(run)["rows"][0]["block_efficiency"] == 1.5
    assert type(validate_run(run)["prompts"][0]["runs"]["ngram p-best"]["steps"][1]["accepted"]) is int
    assert "curves" not in validate_run({**run, "curves": None})


def test_write_refuses_an_existing_file_unless_forced_and_leaves_nothing_on_error(tmp_path):
    out = tmp_path / "report.html"
    assert write_html_report(synthetic_run(), out) == out
    first = out.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="exists .use --force"):
        write_html_report(synthetic_run(), out)
    bad = synthetic_run()
    bad["rows"][0]["tokens_per_s"] = -1
    with pytest.raises(ValueError, match="tokens_per_s"):
        write_html_report(bad, out, force=True)
    assert out.read_text(encoding="utf-8") == first and sorted(tmp_path.iterdir()) == [out]
    changed = synthetic_run()
    changed["title"] = "Second run"
    write_html_report(changed, out, force=True)
    assert "<h1>Second run</h1>" in out.read_text(encoding="utf-8") and sorted(tmp_path.iterdir()) == [out]


# --- (c) headless Chromium -------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(
    find_chromium() is None, reason="Chromium is not installed (apt-get install chromium; .ci/run installs it)"
)


@needs_chromium
def test_chromium_screenshot_shows_the_page(tmp_path):
    page = write_html_report(synthetic_run(), tmp_path / "report.html")
    png = screenshot(page, tmp_path / "report.png", width=1280, height=1600)
    pixels = png_pixels(png)
    assert pixels.shape[:2] == (1600, 1280)
    rgb = pixels[..., :3].reshape(-1, 3)
    assert len(np.unique(rgb, axis=0)) > 200  # text, charts, shading: not a blank or flat page
    assert 0.03 < (rgb != 255).any(axis=1).mean() < 0.6
    for colour in ([78, 121, 167], [242, 142, 43]):  # the two rows' bar colours (charts drawn)
        assert (rgb == colour).all(axis=1).sum() > 1000


@needs_chromium
def test_chromium_runs_the_script_and_renders_the_default_step(tmp_path):
    page = write_html_report(synthetic_run(), tmp_path / "report.html")
    doc = parse_html(_dom_body(dump_dom(page)))
    body = doc.find("body")
    assert body.attrs.get("data-ready") == "1" and "data-js-error" not in body.attrs
    detail = doc.find("aside", id="step-detail")
    assert detail.find("h3").text.startswith("Step 2 of 4: 2 token(s), 1 from the accepted draft")
    table = detail.find("table", cls="lattice")
    assert [th.text for th in table.find("thead").find_all("th")] == ["rank", "head 2 (+1)", "head 3 (+2)"]
    rows = table.find("tbody").find_all("tr")
    assert [[td.find("span", cls="tokstr").text for td in tr.find_all("td")] for tr in rows] == [
        ["·the", "·cat"],
        ["·a", "·dog"],
        ["↵", "⇥&x"],
    ]
    assert [td.find("span", cls="prob").text for td in rows[0].find_all("td")] == ["0.610", "0.400"]
    assert [td.find("span", cls="tokstr").text for td in table.find_all("td", cls="path")] == ["·the"]
    assert [s.text for s in doc.find("div", id="panel-p0-r0").find_all("span", cls="sel")] == [" upon", " the"]


@needs_chromium
def test_chromium_opens_the_linked_step_and_shows_script_tokens_as_text(tmp_path):
    page = write_html_report(synthetic_run(), tmp_path / "report.html")
    doc = parse_html(_dom_body(dump_dom(page, fragment="p1-r1-s2")))
    assert doc.find("body").attrs.get("data-ready") == "1" and "data-js-error" not in doc.find("body").attrs
    assert (
        "hidden" not in doc.find("div", id="panel-p1-r1").attrs and "hidden" in doc.find("div", id="panel-p0-r0").attrs
    )
    assert doc.find("button", data_row="1").attrs["aria-selected"] == "true"
    detail = doc.find("aside", id="step-detail")
    assert detail.find("h3").text.startswith("Step 3 of 3")
    chosen = detail.find("li", cls="chosen")
    assert [c.text for c in chosen.find_all("span", cls="chip")] == [SCRIPT, "·y"]
    assert chosen.find("span", cls="acc").text == SCRIPT and chosen.find("span", cls="rej").text == "·y"
    assert len(doc.find_all("script")) == 2  # nothing was injected by the data


@needs_chromium
def test_screenshot_tool_renders_a_run_json(tmp_path):
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps(synthetic_run()), encoding="utf-8")
    tool = [sys.executable, str(ROOT / "tools" / "report_screenshot.py"), str(run_json)]
    package_parent = str(Path(draftlattice.__file__).resolve().parents[1])  # the draftlattice this test imports
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_parent, os.environ.get("PYTHONPATH", "")])}
    args = [str(tmp_path / "shot.png"), "--html", str(tmp_path / "page.html"), "--step", "p1-r0-s1", "--height", "900"]
    done = subprocess.run([*tool, *args], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert png_pixels(tmp_path / "shot.png").shape[:2] == (900, 1280)
    assert parse_html((tmp_path / "page.html").read_text(encoding="utf-8")).find("div", id="panel-p1-r0")
    again = subprocess.run([*tool, *args], capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 1 and "exists (use --force" in again.stderr
    clobber = subprocess.run([*tool, str(run_json), "--force"], capture_output=True, text=True, env=env, timeout=300)
    assert clobber.returncode == 1 and "the output is also an input" in clobber.stderr


def _dom_body(dom: str) -> str:
    """Chromium's serialised DOM from <body> on (the head's meta tags are fine; the test parser
    wants the well-nested part)."""
    start = dom.index("<body")
    return dom[start : dom.rindex("</body>") + len("</body>")]
