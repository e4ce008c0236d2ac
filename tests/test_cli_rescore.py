"""`draftlattice rescore` and `draftlattice lattice show` end to end (in process)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import draftlattice as dl
from arpa_writer import random_arpa
from draftlattice.cli.main import main


@pytest.fixture()
def lm_path(tmp_path):
    path = tmp_path / "m.arpa"
    random_arpa(path, 3, seed=8, n_words=6, with_unk=True)
    return path


def test_rescore_logits_batch_prints_json_lines(tmp_path, lm_path, capsys):
    logits = np.random.default_rng(0).normal(size=(3, 4, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", logits)
    assert (
        main(
            [
                "rescore",
                "--logits",
                str(tmp_path / "x.npy"),
                "--lm",
                str(lm_path),
                "-k",
                "3",
                "-p",
                "2",
                "--alpha",
                "0.5",
                "--context",
                "1 2",
                "--bos",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.strip().split("\n")
    assert len(lines) == 3
    lm = dl.NgramLM(lm_path)
    for b, line in enumerate(lines):
        record = json.loads(line)
        expected = dl.rescore(dl.Lattice.from_logits(logits[b], 3), lm, p=2, alpha=0.5, context=[1, 2], bos=True)
        assert [d["tokens"] for d in record["drafts"]] == expected.tokens.tolist()
        assert [d["score"] for d in record["drafts"]] == pytest.approx(expected.scores.tolist(), abs=1e-5)


def test_rescore_topk_with_vocab_and_word_context(tmp_path, lm_path, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["0", "1", "2", "3", "4", "5"]) + "\n")
    np.savez(tmp_path / "t.npz", tokens=np.array([[0, 1], [2, 3]]), logprobs=np.array([[-0.1, -2.0], [-0.5, -1.0]]))
    assert (
        main(
            [
                "rescore",
                "--topk",
                str(tmp_path / "t.npz"),
                "--lm",
                str(lm_path),
                "--vocab",
                str(vocab),
                "-p",
                "4",
                "--context",
                "3 4",
            ]
        )
        == 0
    )
    record = json.loads(capsys.readouterr().out)
    assert len(record["drafts"]) == 4 and record["drafts"][0]["words"] == [
        str(t) for t in record["drafts"][0]["tokens"]
    ]


def test_rescore_errors(tmp_path, lm_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.float32))
    assert main(["rescore", "--logits", str(tmp_path / "x.npy"), "--lm", str(lm_path)]) == 1
    assert "-k is required" in capsys.readouterr().err
    assert main(["rescore", "--logits", str(tmp_path / "x.npy"), "--lm", str(lm_path), "-k", "9"]) == 1
    assert "k=9 > vocabulary size V=4" in capsys.readouterr().err
    assert (
        main(["rescore", "--logits", str(tmp_path / "x.npy"), "--lm", str(lm_path), "-k", "2", "--context", "hello"])
        == 1
    )
    assert "--vocab" in capsys.readouterr().err
    np.savez(tmp_path / "bad.npz", tokens=np.array([[0, 1]]))
    assert main(["rescore", "--topk", str(tmp_path / "bad.npz"), "--lm", str(lm_path)]) == 1
    assert "logprobs" in capsys.readouterr().err


def test_lattice_show_dot_fst_png_and_force(tmp_path, capsys):
    np.savez(tmp_path / "t.npz", tokens=np.array([[0, 1], [2, 3]]), logprobs=np.array([[-0.1, -2.0], [-0.5, -1.0]]))
    out = tmp_path / "l.dot"
    assert main(["lattice", "show", str(tmp_path / "t.npz"), "-o", str(out)]) == 0
    assert out.read_text().startswith("digraph")
    assert main(["lattice", "show", str(tmp_path / "t.npz"), "-o", str(out)]) == 1
    assert "--force" in capsys.readouterr().err
    assert main(["lattice", "show", str(tmp_path / "t.npz"), "-o", str(out), "--force"]) == 0
    assert main(["lattice", "show", str(tmp_path / "t.npz"), "-o", str(tmp_path / "l.fst")]) == 0
    assert (tmp_path / "l.fst").read_text().split("\n")[0] == "0\t1\t1\t1\t0.100000001"
    png = tmp_path / "l.png"
    code = main(["lattice", "show", str(tmp_path / "t.npz"), "-o", str(png)])
    if shutil.which("dot"):
        assert code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    else:
        assert code == 1 and "Graphviz" in capsys.readouterr().err
    assert main(["lattice", "show", str(tmp_path / "t.npz"), "-o", str(tmp_path / "l.jpg")]) == 1
