"""`eval`, `trace record`, `lm build` and `model fetch` refuse bad input in one line, before the
long work (loading, recording, evaluating), and never delete what they did not write.

Each refusal runs ``main`` in-process on a tiny target folder (tests/_tiny_target.py) and its
trace (top-K 4), with model loading and the evaluation made to fail the case: what is refused
must be refused before them.
"""

from __future__ import annotations

import hashlib
import shutil
import threading
import time
from pathlib import Path

import pytest

from _cli_errors import one_line_error
from _tiny_target import tiny_target
from draftlattice.cli.main import main
from draftlattice.default_model import fetch

ROOT = Path(__file__).resolve().parents[1]
OTHER_LM = ROOT / "lm_models" / "katz2.dlm"  # built over another tokenizer than the tiny target's
TOP_K = 4  # the trace's
CONTEXT = 256  # the tiny target's max_position_embeddings (tests/_hf_models.py)


@pytest.fixture(scope="module")
def files(tmp_path_factory, one_thread):
    d = tmp_path_factory.mktemp("eval_errors")
    target = tiny_target(d / "target")
    text = d / "text.txt"
    text.write_text("The tower is 324 metres tall, about the same height as a building.\n" * 3)
    (d / "folder").mkdir()
    (d / "file.txt").write_text("a file")
    trace = d / "t.dltrace"
    record = ["--prompt-tokens", "4", "--max-new-tokens", "3", "--top-k", str(TOP_K)]
    assert (
        main(["trace", "record", "--model", str(target.folder), "--prompts", str(text), *record, "-o", str(trace)]) == 0
    )
    return {
        "model": target.folder,
        "lm": target.lm,
        "other_lm": OTHER_LM,
        "text": text,
        "trace": trace,
        "folder": d / "folder",
        "file": d / "file.txt",
        "missing": d / "missing",
    }


@pytest.fixture()
def no_evaluation(monkeypatch):
    """Evaluating a trace fails the case: the arguments must be refused before."""
    import draftlattice.evaluate.report as report

    def refuse(*args, **kwargs):
        pytest.fail("the trace was evaluated before the arguments were checked")

    monkeypatch.setattr(report, "evaluate_trace", refuse)


EVAL = "eval --trace {trace} --lm {lm} --k 4"
LIVE = "eval --live --model {model} --prompts {text} --lm {lm}"
# (command, the phrase its one line must hold); {out} is a path that must stay unwritten
CASES = [
    # 1. values the evaluation cannot use
    (EVAL + " --ks 1000", "--ks 1000: the trace"),
    (EVAL + " --ks 1,8", "--ks 8: the trace"),
    (EVAL.replace("--k 4", "--k 5"), "k=5 candidates per head: the trace records only the top 4"),
    (EVAL + " --ks ,", "--ks takes at least one"),
    (EVAL + " --ps ,", "--ps takes at least one"),
    (EVAL + " --entropy-threshold nan", "--entropy-threshold"),
    (EVAL + " --entropy-threshold -1", "--entropy-threshold"),
    (EVAL + " --entropy-threshold inf", "--entropy-threshold"),
    (EVAL + " --accuracy-threshold nan", "--accuracy-threshold"),
    (EVAL + " --accuracy-threshold 5", "--accuracy-threshold"),
    (EVAL + " --accuracy-threshold -0.1", "--accuracy-threshold"),
    (EVAL + " --alpha 1e308", "--alpha must be a finite number in [0, 1e+06]"),
    (EVAL + " --alpha nan", "--alpha"),
    (EVAL + " --neural-alpha 1e7", "--neural-alpha"),
    (EVAL + " --alphas nan", "--alphas"),
    (EVAL + " --alphas -1", "--alphas"),
    (EVAL + " --tune-alpha --alphas ,", "--alphas takes at least one"),
    (EVAL + " --tune-alpha --alphas 0,1e308", "--alphas"),
    (EVAL + " --prompts {missing} --wikitext-test 0", "--prompts, --wikitext-test: for a live evaluation only"),
    (EVAL + " --top-k 4", "--top-k: for a live evaluation only"),
    (EVAL + " --max-new-tokens 4", "--max-new-tokens: for a live evaluation only"),
    (EVAL + " --dtype bfloat16", "--dtype: for a live evaluation only"),
    # 2. outputs refused before the work, not after it
    (EVAL + " -o {file} --force", "exists and is a file, expected a folder"),
    (EVAL + " -o {out} --html {out}", "-o and --html both name"),
    (EVAL + " --html {folder} --force", "is a folder, expected an HTML file"),
    ("trace record --model {model} --prompts {text} -o {folder} --force", "is a folder, expected a trace file"),
    (LIVE.replace("{lm}", "{other_lm}"), "was built over tokenizer sha256"),
    (LIVE + " --top-k 4", "k=16 candidates per head: --top-k 4 records only the top 4"),
    (LIVE + " --top-k 4 --k 4 --ks 1,8", "--ks 8: --top-k 4"),
    # 5. beyond the model's context
    (
        f"trace record --model {{model}} --prompts {{text}} --prompt-tokens 4 --max-new-tokens {CONTEXT - 3} -o {{out}}",
        f"exceed the model's context of {CONTEXT} tokens",
    ),
    ("trace record --model {model} --prompts {text} --max-new-tokens 99999999999 -o {out}", "context"),
    (LIVE + " --max-new-tokens 99999999999", "context"),
    # 4. Spark partitions
    ("lm build {text} --order 3 -o {out}.arpa --engine spark --partitions -1", "--partitions must be >= 1, got -1"),
    ("lm build {text} --order 3 -o {out}.arpa --engine spark --partitions 0", "--partitions must be >= 1, got 0"),
    ("lm build {text} --order 3 -o {out}.arpa --partitions 0", "--partitions must be >= 1, got 0"),
]


@pytest.mark.parametrize(("template", "phrase"), CASES, ids=[c[0].split(" {")[0] + ":" + c[1] for c in CASES])
def test_bad_input_is_one_line_before_any_work(
    files, empty_cache, no_loading, no_evaluation, tmp_path, capsys, template, phrase
):
    out = tmp_path / "out"
    line = one_line_error(template.format(out=out, **files).split(), capsys)
    assert phrase in line, f"the message does not say {phrase!r}: {line}"
    assert list(tmp_path.iterdir()) == [], f"written before refusing: {list(tmp_path.iterdir())}"
    assert sorted(p.name for p in files["folder"].iterdir()) == [] and files["file"].read_text() == "a file"


def _eval(files, *extra) -> int:
    grid = ["--k", "4", "--p", "2", "--ps", "1", "--no-adaptive"]
    return main(["eval", "--trace", str(files["trace"]), "--lm", str(files["lm"]), *grid, *map(str, extra)])


def test_the_default_ks_stop_at_the_traces_top_k(files, capsys):
    assert _eval(files) == 0
    figure6 = capsys.readouterr().out.split("Figure 6: oracle top-k block efficiency\n", 1)[1].splitlines()[0]
    assert [part.split(":")[0] for part in figure6.split()[::2]] == ["k=1", "k=2", "k=4"]


def test_alphas_without_tune_alpha_says_it_does_nothing(files, capsys):
    assert _eval(files, "--alphas", "0,1") == 0
    assert "--alphas has no effect without --tune-alpha" in capsys.readouterr().err


# 3. --force never deletes what eval did not write


def test_force_never_replaces_a_folder_holding_the_input_trace(files, tmp_path, capsys, no_evaluation):
    folder = tmp_path / "work"
    folder.mkdir()
    trace = folder / "t.dltrace"
    shutil.copy(files["trace"], trace)
    (folder / "notes.txt").write_text("mine")
    args = ["eval", "--trace", str(trace), "--lm", str(files["lm"]), "--k", "4", "-o", str(folder), "--force"]
    line = one_line_error(args, capsys)
    assert "holds the input" in line and str(trace) in line
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "t.dltrace"]
    assert (folder / "notes.txt").read_text() == "mine"
    assert trace.read_bytes() == files["trace"].read_bytes()


@pytest.mark.parametrize("foreign", ["notes.txt", "results.json/"])
def test_force_never_replaces_a_folder_holding_other_files(files, tmp_path, capsys, no_evaluation, foreign):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "tables.txt").write_text("an old report")
    if foreign.endswith("/"):  # a folder under a report file's name
        (folder / foreign.rstrip("/")).mkdir()
    else:
        (folder / foreign).write_text("mine")
    line = one_line_error(
        ["eval", "--trace", str(files["trace"]), "--lm", str(files["lm"]), "--k", "4", "-o", str(folder), "--force"],
        capsys,
    )
    assert f"holds {foreign.rstrip('/')}, not a file of eval's report" in line and str(folder) in line
    assert sorted(p.name for p in folder.iterdir()) == sorted(["tables.txt", foreign.rstrip("/")])


def test_force_replaces_a_previous_report(files, tmp_path, capsys):
    folder = tmp_path / "report"
    assert _eval(files, "-o", folder) == 0
    written = sorted(p.name for p in folder.iterdir())
    assert "results.json" in written and "tables.txt" in written
    (folder / "tables.txt").write_text("stale")
    page = folder / "eval.html"
    assert _eval(files, "-o", folder, "--force", "--html", page) == 0  # this run's page goes in it
    assert (folder / "tables.txt").read_text() != "stale" and page.stat().st_size > 0
    assert _eval(files, "-o", folder, "--force", "--html", page) == 0  # and is replaced with it
    assert sorted(p.name for p in folder.iterdir()) == sorted([*written, "eval.html"])


# 6. model fetch leaves no lock file and no folder behind


def test_a_refused_fetch_leaves_no_lock_and_creates_no_folder(tmp_path, capsys):
    bad = tmp_path / "r.gguf"
    bad.write_bytes(bytes(range(256)) * 20)
    (tmp_path / "small.arpa").write_text("mine")
    for dest in ("d4", "nodir/x", "small.arpa"):
        line = one_line_error(["model", "fetch", "--from", str(bad), "--dest", str(tmp_path / dest)], capsys)
        assert "sha256" in line or "exists but is not a completed fetch" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.gguf", "small.arpa"]
    assert (tmp_path / "small.arpa").read_text() == "mine"


def test_a_fetch_failing_after_the_lock_removes_it_and_the_folders_it_made(tmp_path, monkeypatch):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(fetch, "GGUF_SHA256", hashlib.sha256(b"GGUF").hexdigest())

    def unreadable(path, work, report):
        assert (work.parent / ".x.lock").exists()  # held meanwhile
        raise fetch.FetchError("transformers cannot read this GGUF")

    monkeypatch.setattr(fetch, "_convert_gguf", unreadable)
    with pytest.raises(fetch.FetchError, match="cannot read"):
        fetch.fetch_default(gguf, destination=tmp_path / "new" / "deeper" / "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"]


def test_a_successful_fetch_removes_its_lock(tmp_path):
    source = tmp_path / "model"
    source.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (source / name).write_text("{}")
    out = fetch.fetch_default(source, destination=tmp_path / "cache" / "m")
    assert fetch.is_fetched(out)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["m"]


def test_the_lock_still_excludes_when_its_file_is_deleted(tmp_path, monkeypatch):
    """Each holder deletes the lock file when done; a waiter that locked the deleted file must
    take the new one instead, so that at most one holds the lock at any time."""
    monkeypatch.setattr(fetch, "LOCK_POLL_SECONDS", 0.001)
    out = tmp_path / "m"
    holders, most, errors = [0], [0], []
    guard = threading.Lock()

    def worker():
        try:
            for _ in range(15):
                with fetch._locked(out):
                    with guard:
                        holders[0] += 1
                        most[0] = max(most[0], holders[0])
                    time.sleep(0.002)
                    with guard:
                        holders[0] -= 1
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and most[0] == 1
    assert list(tmp_path.iterdir()) == []
