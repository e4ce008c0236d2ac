"""The CLI's overwrite policy, optional plotting, k validation and file-kind messages."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path

import pytest

from _tiny_target import tiny_target
from draftlattice.apps.demo import check_candidates
from draftlattice.cli._output import atomic_dir, atomic_file, check_output
from draftlattice.cli.main import main
from draftlattice.filekinds import describe, expect

ROOT = Path(__file__).resolve().parents[1]
KATZ2 = str(ROOT / "lm_models" / "katz2.dlm")


# --- the policy itself -----------------------------------------------------------------------


def test_existing_output_needs_force(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old")
    with pytest.raises(ValueError, match="out.txt: exists .use --force"):
        check_output(out, force=False)
    assert check_output(out, force=True) == out


def test_an_input_is_never_overwritten_even_with_force(tmp_path):
    data = tmp_path / "x.arpa"
    data.write_text("data")
    for alias in (data, tmp_path / "." / "x.arpa"):
        with pytest.raises(ValueError, match="also an input"):
            check_output(alias, force=True, inputs=[None, data])


def test_missing_parent_is_refused(tmp_path):
    with pytest.raises(ValueError, match="parent folder"):
        check_output(tmp_path / "no" / "out", force=False)


def test_failed_write_leaves_the_old_file_intact(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old")
    with pytest.raises(RuntimeError), atomic_file(out) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    with atomic_file(out) as tmp:
        tmp.write_text("new")
    assert out.read_text() == "new"


def test_failed_folder_write_leaves_the_old_folder_intact(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "config.json").write_text("old")
    with pytest.raises(KeyboardInterrupt), atomic_dir(out) as tmp:
        (tmp / "config.json").write_text("half")
        raise KeyboardInterrupt
    assert (out / "config.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    with atomic_dir(out) as tmp:
        (tmp / "weights").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["weights"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_tokenizer_train_refuses_to_overwrite_its_corpus(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("some words here\n" * 50)
    assert main(["tokenizer", "train", str(corpus), "--vocab-size", "300", "-o", str(corpus), "--force"]) == 1
    assert "also an input" in capsys.readouterr().err and corpus.read_text().startswith("some words")


# --- trace record / eval end to end ----------------------------------------------------------


@pytest.fixture(scope="module")
def target(tmp_path_factory, one_thread):
    """A tiny target folder (transformers model + heads) and an LM over its tokenizer."""
    return tiny_target(tmp_path_factory.mktemp("target"))


@pytest.fixture(scope="module")
def model_dir(target):
    return target.folder


@pytest.fixture(scope="module")
def trace_path(model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    prompts = folder / "prompts.txt"
    prompts.write_text("The tower is 324 metres tall, about the same height as an 81-storey building.\n")
    path = folder / "t.dltrace"
    assert (
        main(
            [
                "trace",
                "record",
                "--model",
                str(model_dir),
                "--prompts",
                str(prompts),
                "--prompt-tokens",
                "8",
                "--max-new-tokens",
                "6",
                "--top-k",
                "4",
                "-o",
                str(path),
            ]
        )
        == 0
    )
    return path


def test_trace_record_refuses_to_overwrite(trace_path, model_dir, capsys):
    before = trace_path.read_bytes()
    assert main(["trace", "record", "--model", str(model_dir), "--wikitext-test", "1", "-o", str(trace_path)]) == 1
    assert "exists (use --force" in capsys.readouterr().err and trace_path.read_bytes() == before


def _eval(trace_path, lm, *extra):
    return main(
        [
            "eval",
            "--trace",
            str(trace_path),
            "--lm",
            str(lm),
            "--k",
            "4",
            "--p",
            "2",
            "--ks",
            "1,4",
            "--ps",
            "1,2",
            "--no-adaptive",
            *extra,
        ]
    )


def test_eval_writes_results_without_matplotlib(trace_path, target, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    out = tmp_path / "report"
    assert _eval(trace_path, target.lm, "-o", str(out)) == 0
    assert "figures skipped: plots need matplotlib: pip install 'draftlattice[plot]'" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "tables.txt"]
    assert "table4" in json.loads((out / "results.json").read_text())


def test_eval_output_policy(trace_path, target, tmp_path, capsys):
    out = tmp_path / "report"
    out.mkdir()
    (out / "keep").write_text("x")
    assert _eval(trace_path, target.lm, "-o", str(out)) == 1
    assert "exists (use --force" in capsys.readouterr().err and (out / "keep").exists()
    assert _eval(trace_path, target.lm, "-o", str(trace_path), "--force") == 1
    assert "also an input" in capsys.readouterr().err
    assert _eval(trace_path, target.lm, "-o", str(out), "--force") == 0
    assert (out / "figure6_oracle.png").is_file() and not (out / "keep").exists()


def test_eval_k_beyond_the_trace_is_an_error(trace_path, target, capsys):
    assert main(["eval", "--trace", str(trace_path), "--lm", str(target.lm), "--k", "5000"]) == 1
    assert "k=5000 candidates per head: the trace records only the top 4" in capsys.readouterr().err


# --- k against V -----------------------------------------------------------------------------


def test_k_is_checked_against_the_vocabulary(caplog):
    with pytest.raises(ValueError, match="k=5000 .* vocabulary size 4096"):
        check_candidates(5000, 4, 4096)
    with pytest.raises(ValueError, match="k=0"):
        check_candidates(0, 4, 4096)
    with pytest.raises(ValueError, match="p=0"):
        check_candidates(8, 0, 4096)
    with caplog.at_level(logging.WARNING):
        check_candidates(1000, 4, 4096)
    assert "much slower" in caplog.text


def test_demo_k_beyond_the_vocabulary_is_one_line(capsys):
    assert main(["demo", "--quick", "--k", "60000"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "k=60000" in err and "vocabulary size" in err


# --- what a file is --------------------------------------------------------------------------


def test_describe_names_the_kinds(tmp_path, trace_path, target):
    arpa = tmp_path / "a.arpa"
    arpa.write_text("\n\\data\\\nngram 1=1\n")
    empty = tmp_path / "e"
    empty.write_bytes(b"")
    assert describe(arpa) == "an ARPA n-gram LM"
    assert describe(KATZ2).startswith("a draftlattice binary n-gram LM")
    assert describe(trace_path) == "a draftlattice decoding trace"
    model = target.folder / "model"
    assert describe(model) == "a model folder (config.json)"
    assert describe(model / "model.safetensors") == "a safetensors weights file"
    assert describe(empty) == "an empty file" and describe(tmp_path / "nothing") == "missing"
    with pytest.raises(ValueError, match="model: is a model folder .config.json., expected an LM"):
        expect(model, "an LM", ("an ARPA",))


def test_lm_compile_and_build_never_write_over_their_inputs(tmp_path, capsys):
    arpa = tmp_path / "m.arpa"
    shutil.copyfile(Path(__file__).resolve().parents[1] / "tools" / "fuzz" / "corpus" / "arpa" / "katz3.arpa", arpa)
    before = arpa.read_bytes()
    assert main(["lm", "compile", str(arpa), "-o", str(arpa), "--force"]) == 1
    assert "also an input" in capsys.readouterr().err and arpa.read_bytes() == before
    out = tmp_path / "m.dlm"
    assert main(["lm", "compile", str(arpa), "-o", str(out)]) == 0
    assert main(["lm", "compile", str(arpa), "-o", str(out)]) == 1  # exists, no --force
    assert "use --force" in capsys.readouterr().err
    assert main(["lm", "compile", str(arpa), "-o", str(out), "--force"]) == 0
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\nthe dog sat\n")
    assert main(["lm", "build", str(corpus), "--order", "2", "-o", str(corpus), "--force"]) == 1
    assert corpus.read_text() == "the cat sat\nthe dog sat\n"
