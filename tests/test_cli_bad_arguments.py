"""Every command refuses a bad argument in one line before it fetches, loads or writes anything.

Each case runs ``main`` in-process with an empty user cache in which a fetch of the default model
fails the case (conftest.py's ``empty_cache``), with model loading made to fail the case too,
and checks: a non-zero exit, exactly one line on stderr naming the problem, no output file, and
nothing created in the cache. (The files themselves, missing, empty, truncated or of another
kind, are test_cli_bad_files.py's.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from _cli_errors import one_line_error
from _tiny_target import tiny_target
from draftlattice.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory, one_thread):
    d = tmp_path_factory.mktemp("args")
    target = tiny_target(d / "target")
    (d / "text.txt").write_text("The tower is 324 metres tall, about the same height as a building.\n" * 3)
    (d / "lm.arpa").write_text("\\data\\\nngram 1=3\n\n\\1-grams:\n-1.0\t<s>\t-0.3\n-0.5\ta\n-0.5\t</s>\n\n\\end\\\n")
    cut = d / "cut.dlm"
    cut.write_bytes(target.lm.read_bytes()[: target.lm.stat().st_size // 2])
    (d / "exists.json").write_text("{}")
    (d / "folder").mkdir()
    (d / "heads").mkdir()
    (d / "heads" / "config.json").write_text("{}")  # heads, not a training checkpoint
    assert (
        main(
            [
                "trace",
                "record",
                "--model",
                str(target.folder),
                "--prompts",
                str(d / "text.txt"),
                "--prompt-tokens",
                "4",
                "--max-new-tokens",
                "2",
                "-o",
                str(d / "good.dltrace"),
            ]
        )
        == 0
    )
    return {
        "model": target.folder,
        "lm": target.lm,
        "cut_lm": cut,
        "arpa": d / "lm.arpa",
        "text": d / "text.txt",
        "trace": d / "good.dltrace",
        "npz": ROOT / "examples" / "wt2_lattice.npz",
        "exists": d / "exists.json",
        "missing": d / "missing",
        "folder": d / "folder",
        "heads_folder": d / "heads",
    }


# (command, the phrase its one line must hold); {out} is a path that must stay unwritten
CASES = [
    ("lm info {missing}", "missing"),
    ("lm score {arpa}", "give either TEXT arguments or --file"),
    ("lm compile {arpa} -o {out}/sub/x.dlm", "does not exist"),
    ("lm build {text} --order 0 -o {out}.dlm", "order"),
    ("rescore --topk {npz} --lm {arpa} -p 0", "p"),
    ("lattice show {npz} -o {out}.jpg", "suffix"),
    ("tokenizer train {text} --vocab-size 0 -o {out}", "vocab"),
    ("model perplexity --text {text} --model {model} --stride 0", "--stride"),
    ("model perplexity --text {text} --lm {cut_lm}", "cut.dlm"),  # the default model: not fetched
    ("model perplexity --text {missing}", "missing"),
    ("model fetch --from {missing}", "no such file or folder"),
    ("trace record --prompts {text} --max-new-tokens 0 -o {out}", "--max-new-tokens"),
    ("trace record --model {model} --prompts {missing} -o {out}", "missing"),
    ("trace record --model {missing} --prompts {text} -o {out}", "missing"),
    ("trace record --prompts {text} -o {exists}", "exists"),
    ("trace info {missing}", "missing"),
    ("eval --trace {trace} --lm {lm} --k 0", "--k"),
    ("eval --trace {trace} --lm {lm} --ks 1,x", "--ks"),
    ("eval --trace {trace} --lm {lm} --heldout-fraction 1", "--heldout-fraction"),
    ("eval --live --prompts {text} --lm {cut_lm}", "cut.dlm"),  # the default model: not fetched
    ("eval --live --prompts {text} --lm {lm} --top-k 0", "--top-k"),
    ("eval --live --model {model} --prompts {text} --lm {lm} -o {exists}", "exists"),
    ("hf train-heads {missing} --data {text} -o {out}", "missing"),
    ("hf train-heads {model}/model --data {text} --horizon 1 -o {out}", "horizon"),
    ("hf train-heads {model}/model --data {missing} -o {out}", "missing"),
    ("hf train-heads {model}/model --data {text} --lr -1 -o {out}", "--lr"),
    ("demo --quick --horizon 9", "horizon"),
    ("demo --quick --k 0", "k"),
    ("demo --quick --p 0", "p"),
    ("demo --quick --alpha -1", "alpha"),
    ("demo --quick --temperature 0", "temperature"),
    ("demo --quick --temperature 1 --top-p 2", "top_p"),
    ("demo --chat 0 --text 0", "no prompt"),
    ("demo --quick --threads 0", "--threads"),
    ("demo --quick --weights int4 --dtype float32", "computes in bfloat16"),
    ("demo --quick --weights int8 --step transformers", "needs --step lean"),
    ("demo --quick --kernel avx512-vnni --weights dense", "--kernel runs the lean step's quantized weights"),
    ("demo --quick --kernel avx2 --step transformers", "--kernel runs the lean step's quantized weights"),
    ("demo --quick --kernel sse9", "kernel must be one of auto, torch"),
    ("demo --quick --lm {cut_lm}", "cut.dlm"),
    ("demo --quick --model-dir {missing}", "missing"),
    ("demo --quick --models {missing}", "missing"),
    ("demo --quick --data {missing}", "missing"),
    ("demo --quick --json {exists}", "exists"),
    ("demo --quick --json {out}.json --html {out}.json", "same file"),
    ("demo --quick --json {folder} --force", "is a folder"),
    ("demo --quick --json /proc/draftlattice-demo.json", "cannot write in /proc"),
    ("demo --quick --alpha inf", "alpha must be a finite number"),
    ("demo --quick --temperature inf", "temperature must be a finite number"),
    ("demo --chat 1000000", "chat questions"),
    ("demo --quick --k 1000000", "vocabulary size 49152"),
    ("demo --quick --nodes 100000000", "nodes must be at most 4096"),
    ("demo --quick --p 5000", "p must be at most 1024"),
    ("hf train-heads {model}/model --data {text} -o {heads_folder}", "no training checkpoint"),
    ("hf train-heads {model}/model --data {text} -o {out} --device bogus", "not a torch device"),
]


@pytest.mark.parametrize(("template", "phrase"), CASES, ids=[c[0].split(" {")[0] + ":" + c[1] for c in CASES])
def test_bad_argument_is_one_line_before_any_work(files, empty_cache, no_loading, tmp_path, capsys, template, phrase):
    out = tmp_path / "out"
    argv = template.format(out=out, **files).split()
    line = one_line_error(argv, capsys)
    assert phrase in line, f"the message does not say {phrase!r}: {line}"
    assert list(tmp_path.iterdir()) == [], f"written before refusing: {list(tmp_path.iterdir())}"


def test_demo_without_the_data_directory_says_how_to_run_without_it(
    files, empty_cache, no_loading, monkeypatch, capsys
):
    monkeypatch.setenv("DRAFTLATTICE_DATA", str(files["missing"]))
    line = one_line_error(["demo", "--quick"], capsys)
    assert "--data FILE" in line and "--text 0" in line, line


def test_demo_with_chat_prompts_alone_looks_for_no_data_file(monkeypatch):
    from draftlattice.cli._demo_checks import wikitext

    monkeypatch.setenv("DRAFTLATTICE_DATA", "/nonexistent-draftlattice-data")
    assert wikitext(argparse.Namespace(data=None, text=0)) is None
