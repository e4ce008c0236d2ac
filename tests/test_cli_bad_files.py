"""Every CLI subcommand that reads a file, given a missing, empty, truncated or wrong-type file,
prints one line naming the file and exits non-zero, with no traceback.

Each case runs ``main`` in-process with an empty user cache (the ``empty_cache`` fixture of
conftest.py: a fetch of the default model fails the case), so the file is refused before the
default model is fetched, whatever an earlier run left in the real cache. An exception escaping
``main`` (a traceback for the user) fails the case.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from _cli_errors import one_line_error
from _tiny_target import tiny_target
from draftlattice.evaluate.trace import save_trace
from test_trace import small_trace

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory, one_thread):
    """Good inputs of every kind, and bad ones (empty / truncated / other kind) derived from them."""
    d = tmp_path_factory.mktemp("files")
    target = tiny_target(d / "target")  # a target folder (model/ + heads/) and an LM over its tokenizer
    save_trace(small_trace(), d / "good.dltrace")
    (d / "text.txt").write_text("The tower is 324 metres tall, about the same height as a building.\n" * 3)
    arpa = "\\data\\\nngram 1=3\n\n\\1-grams:\n-1.0\t<s>\t-0.3\n-0.5\ta\n-0.5\t</s>\n\n\\end\\\n"
    (d / "lm.arpa").write_text(arpa)
    good = {
        "trace": d / "good.dltrace",
        "lm": target.lm,
        "arpa": d / "lm.arpa",
        "model": target.folder,
        "text": d / "text.txt",
        "npz": ROOT / "examples" / "wt2_lattice.npz",
        "vocab": ROOT / "examples" / "wt2_vocab.txt",
    }
    np.save(d / "logits.npy", np.zeros((2, 8), np.float32))
    good["npy"] = d / "logits.npy"
    (d / "empty").write_bytes(b"")
    bad = {"missing": lambda kind: d / f"missing-{kind}", "empty": lambda kind: d / "empty"}

    def truncated(kind):
        source = good[kind]
        if source.is_dir():  # a target folder with the model's weights cut in half
            out = d / f"cut-{kind}"
            if not out.exists():
                shutil.copytree(source, out)
                weights = out / "model" / "model.safetensors"
                weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
            return out
        out = d / f"cut-{source.name}"
        out.write_bytes(source.read_bytes()[: max(1, source.stat().st_size // 2)])
        return out

    other = {
        "trace": "arpa",
        "lm": "model",
        "arpa": "trace",
        "model": "lm",
        "text": "lm",
        "npz": "arpa",
        "npy": "trace",
        "vocab": "lm",
    }
    bad["truncated"] = truncated
    bad["wrong type"] = lambda kind: good[other[kind]]
    return d, good, bad


# (command with {} for the bad file and {kind} for good ones, kind of the slot)
COMMANDS = [
    ("trace info {}", "trace"),
    ("eval --trace {} --lm {lm} --k 2", "trace"),
    ("eval --trace {trace} --lm {} --k 2", "lm"),
    ("demo --quick --lm {}", "lm"),
    ("trace record --model {} --prompts {text} -o {out}", "model"),
    ("trace record --model {model} --prompts {} --prompt-tokens 4 --max-new-tokens 2 -o {out}", "text"),
    ("eval --live --model {} --prompts {text} --lm {lm} --k 2", "model"),
    ("eval --live --model {model} --prompts {} --lm {lm} --k 2", "text"),
    ("model perplexity --text {} --model {model}", "text"),
    ("model perplexity --text {text} --model {}", "model"),
    ("model perplexity --text {text} --model {model} --lm {}", "lm"),
    ("tokenizer train {} --vocab-size 300 -o {out}", "text"),
    ("lm info {}", "lm"),
    ("lm score {} a", "lm"),
    ("lm compile {} -o {out}", "arpa"),
    ("lm build {} -o {out}.dlm", "text"),
    ("rescore --topk {} --lm {lm} -p 2", "npz"),
    ("rescore --logits {} -k 2 --lm {lm} -p 2", "npy"),
    ("rescore --topk {npz} --lm {} --vocab {vocab} -p 2", "lm"),
    ("rescore --topk {npz} --lm {arpa} --vocab {} -p 2", "vocab"),
    ("lattice show {} -o {out}.dot", "npz"),
]
PROBLEMS = ["missing", "empty", "truncated", "wrong type"]
# Cases that do not apply: a plain text file cannot be truncated, an empty vocabulary is legal input.
NOT_APPLICABLE = {("text", "truncated"), ("vocab", "truncated"), ("vocab", "empty")}


def _cases():
    for template, kind in COMMANDS:
        for problem in PROBLEMS:
            if (kind, problem) in NOT_APPLICABLE:
                continue
            yield pytest.param(template, kind, problem, id=f"{template.split(' {')[0]}:{kind}:{problem}")


@pytest.mark.parametrize(("template", "kind", "problem"), list(_cases()))
def test_bad_file_is_one_line(files, empty_cache, tmp_path, capsys, template, kind, problem):
    d, good, bad = files
    path = bad[problem](kind)
    argv = template.format(path, out=tmp_path / "out", **good).split()
    line = one_line_error(argv, capsys)
    assert path.name in line, f"{problem} {kind}: the message does not name {path.name}: {line}"
