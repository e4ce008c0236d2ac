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
    assert _eval(trace_path, target.lm, "-o", str(out), "--force") == 1  # not a report of ours
    assert "keep" in capsys.readouterr().err and (out / "keep").read_text() == "x"
    (out / "keep").unlink()
    assert _eval(trace_path, target.lm, "-o", str(out), "--force") == 0
    assert _eval(trace_path, target.lm, "-o", str(out), "--force") == 0  # a report replaces a report
    assert (out / "figure6_oracle.png").is_file()


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


# --- outputs of lattice show, hf datastore, hf train-heads and demo -------------------------


NPZ = ROOT / "examples" / "wt2_lattice.npz"
VOCAB = ROOT / "examples" / "wt2_vocab.txt"


def test_lattice_show_never_writes_over_its_inputs_and_replaces_a_link_not_its_target(tmp_path, capsys):
    shutil.copy(NPZ, tmp_path / "in.txt")  # a top-k npz under a .txt name, shown onto itself
    vocab = tmp_path / "vocab.dot"
    shutil.copy(VOCAB, vocab)
    before = (tmp_path / "in.txt").read_bytes()
    assert main(["lattice", "show", str(tmp_path / "in.txt"), "-o", str(tmp_path / "in.txt"), "--force"]) == 1
    assert "also an input" in capsys.readouterr().err
    assert (tmp_path / "in.txt").read_bytes() == before
    assert main(["lattice", "show", str(NPZ), "--vocab", str(vocab), "-o", str(vocab), "--force"]) == 1
    assert "also an input" in capsys.readouterr().err and vocab.read_bytes() == VOCAB.read_bytes()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "link.dot").symlink_to(victim)
    assert main(["lattice", "show", str(NPZ), "-o", str(tmp_path / "link.dot"), "--force"]) == 0
    assert victim.read_text() == "keep" and not (tmp_path / "link.dot").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "link.dot", "victim.txt", "vocab.dot"]


@pytest.mark.parametrize(
    ("extra", "phrase"),
    [(["-k", "3"], "apply to logits .npy input"), (["--temperature", "-5"], "apply to logits .npy input")],
)
def test_lattice_show_refuses_logits_options_on_a_topk_input(tmp_path, capsys, extra, phrase):
    assert main(["lattice", "show", str(NPZ), "-o", str(tmp_path / "x.dot"), *extra]) == 1
    assert phrase in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_lattice_show_asks_for_k_on_a_logits_input(tmp_path, capsys):
    import numpy as np

    logits = tmp_path / "lg.npy"
    np.save(logits, np.zeros((4, 100), dtype=np.float32))
    assert main(["lattice", "show", str(logits), "-o", str(tmp_path / "x.dot")]) == 1
    assert "needs -k" in capsys.readouterr().err


def _corpus(folder: Path) -> Path:
    import numpy as np

    from draftlattice.distilled_corpus import FORMAT, META, write_shard

    folder.mkdir()
    (folder / META).write_text(json.dumps({"format": FORMAT, "version": 1, "mode": "greedy"}))
    write_shard(folder / "shard-00000.npz", [(np.array([1, 2, 3, 4, 5]), 2)])
    return folder


def test_hf_datastore_never_writes_into_the_corpus_it_reads(tmp_path, capsys):
    corpus = _corpus(tmp_path / "corpus")
    shard = (corpus / "shard-00000.npz").read_bytes()
    for out in (corpus / "shard-00000.npz", corpus / "store.npz"):
        assert main(["hf", "datastore", str(corpus), "-o", str(out), "--force"]) == 1
        assert "inside the distilled corpus" in capsys.readouterr().err
    assert (corpus / "shard-00000.npz").read_bytes() == shard and not (corpus / "store.npz").exists()


def test_hf_datastore_refuses_a_folder_and_leaves_nothing_when_writing_fails(tmp_path, capsys, monkeypatch):
    import numpy as np

    corpus = _corpus(tmp_path / "corpus")
    (tmp_path / "adir").mkdir()
    assert main(["hf", "datastore", str(corpus), "-o", str(tmp_path / "adir"), "--force"]) == 1
    assert "is a folder" in capsys.readouterr().err
    keep = tmp_path / "keep.npz"
    keep.write_text("old")

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez_compressed", disk_full)
    assert main(["hf", "datastore", str(corpus), "-o", str(keep), "--force"]) == 1
    assert "keep.npz" in capsys.readouterr().err
    assert keep.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "corpus", "keep.npz"]


def test_outputs_written_under_a_temporary_name_get_the_usual_permissions(tmp_path):
    import os

    old = os.umask(0o027)
    try:
        with atomic_file(tmp_path / "f.txt") as tmp:
            tmp.write_text("x")
        with atomic_dir(tmp_path / "d") as tmp:
            (tmp / "x").write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o750


def test_check_output_tries_the_folder_and_the_kind(tmp_path):
    (tmp_path / "adir").mkdir()
    with pytest.raises(ValueError, match="is a folder, expected a file"):
        check_output(tmp_path / "adir", force=True, expect="file")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="is a file, expected a folder"):
        check_output(tmp_path / "afile", force=True, expect="folder")
    with pytest.raises(ValueError, match="cannot write in /proc"):
        check_output("/proc/draftlattice-probe.json", force=False, expect="file")
    assert check_output(tmp_path / "new.json", force=False, expect="file") == tmp_path / "new.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]  # the probe is gone


def test_demo_refuses_more_new_tokens_than_the_models_context():
    from types import SimpleNamespace

    from draftlattice.apps.demo_prompts import DemoPrompt
    from draftlattice.cli._demo_checks import check_context

    prompts = [DemoPrompt("chat", "q", [1] * 40)]
    check_context(SimpleNamespace(max_position_embeddings=8192), prompts, 8152)
    with pytest.raises(ValueError, match="exceed the model's context of 8192 tokens"):
        check_context(SimpleNamespace(max_position_embeddings=8192), prompts, 8153)
