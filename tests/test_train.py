"""End-to-end training on a tiny corpus: the loss falls, the output loads, evaluation agrees."""

from __future__ import annotations

import json

import pytest

from draftlattice.cli.main import main
from draftlattice.model import BlockwiseLM
from draftlattice.model.data import eval_windows, token_stream
from draftlattice.model.evaluate import evaluate_file
from draftlattice.tokenizer import train_tokenizer

SENTENCES = ["the cat sat on the mat .", "the dog sat on the log .", "a bird sang in the tree ."]

pytestmark = pytest.mark.usefixtures("one_thread")


def test_train_cli_end_to_end(tmp_path, capsys):
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n".join(SENTENCES * 40) + "\n")
    tokenizer = tmp_path / "tok.json"
    train_tokenizer([corpus], 280, tokenizer)
    out = tmp_path / "model"
    args = [
        "train",
        str(corpus),
        "--tokenizer",
        str(tokenizer),
        "--valid",
        str(corpus),
        "-o",
        str(out),
        "--n-layer",
        "1",
        "--n-head",
        "2",
        "--d-model",
        "16",
        "--d-ff",
        "32",
        "--num-heads",
        "3",
        "--max-seq-len",
        "64",
        "--seq-len",
        "16",
        "--batch-size",
        "4",
        "--max-steps",
        "60",
        "--warmup-steps",
        "5",
        "--lr",
        "1e-2",
        "--eval-every",
        "20",
        "--eval-windows",
        "4",
        "--head-fraction",
        "0.5",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--threads",
        "1",
    ]
    assert main(args) == 0
    history = json.loads((out / "train_log.json").read_text())["history"]
    assert [r["step"] for r in history] == [20, 40, 60, 60]
    assert history[-1]["valid_perplexity"] < history[0]["valid_perplexity"] < 280
    model = BlockwiseLM.from_pretrained(out)
    assert model.config.num_heads == 3 and model.config.eos_token_id == 0
    assert (out / "tokenizer.json").read_bytes() == tokenizer.read_bytes()
    metrics = evaluate_file(model, tokenizer, corpus, seq_len=16, max_windows=4)
    # fp16 storage changes the metrics only slightly from the trainer's last (fp32) evaluation
    assert metrics["perplexity"] == pytest.approx(history[-1]["valid_perplexity"], rel=1e-2)
    assert len(metrics["head_accuracy"]) == 3 and metrics["tokens"] == 4 * 16
    capsys.readouterr()
    assert (
        main(
            [
                "model",
                "perplexity",
                "--model",
                str(out),
                "--text",
                str(corpus),
                "--seq-len",
                "16",
                "--stride",
                "16",
                "--json",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert printed["model"] > 1 and len(printed["head_accuracy"]) == 2


def test_token_stream_cache_and_windows(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(" the cat sat \n \n\nthe dog\n")
    tokenizer = tmp_path / "tok.json"
    train_tokenizer([corpus], 270, tokenizer)
    stream = token_stream(corpus, tokenizer, tmp_path / "cache")
    assert list(tmp_path.joinpath("cache").iterdir())  # cached
    assert (token_stream(corpus, tokenizer, tmp_path / "cache") == stream).all()
    assert int((stream == 0).sum()) == 2  # one <|endoftext|> per non-blank line
    windows = eval_windows(stream, 2, 1)
    assert windows.shape[1] == 3 and (windows[1, :1] == stream[2:3]).all()
    with pytest.raises(ValueError, match="shorter than one window"):
        eval_windows(stream, 100, 1)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(ValueError, match="empty"):
        token_stream(empty, tokenizer)
