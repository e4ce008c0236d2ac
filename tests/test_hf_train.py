"""train_heads / `draftlattice hf train-heads`, and LMs built over a model folder's tokenizer."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
)

import draftlattice.hf as dlhf
from draftlattice import NgramLM
from draftlattice.cli.main import main
from draftlattice.ngram.build import build_lm
from draftlattice.pairing import TokenizerMismatchError
from draftlattice.tokenizer import train_tokenizer
from draftlattice.training import train_heads
from draftlattice.training.trainer import _own_continuations

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model_dir(shared_data, tmp_path_factory):
    """A tiny GPT-2 folder with its own byte-level BPE tokenizer, and a small corpus."""
    root = tmp_path_factory.mktemp("hfmodel")
    lines = (shared_data / "wikitext-2" / "train.txt").read_text().splitlines()
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(line for line in lines[:600] if line.strip()) + "\n")
    folder = root / "model"
    train_tokenizer([corpus], 320, root / "tokenizer.json")
    tok = PreTrainedTokenizerFast(tokenizer_file=str(root / "tokenizer.json"), eos_token="<|endoftext|>")
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=128, bos_token_id=0, eos_token_id=0
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    return folder, corpus


def load(folder):
    return AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True).eval()


def test_training_lowers_the_loss_and_resumes(model_dir, tmp_path):
    folder, corpus = model_dir
    model = load(folder)
    out = tmp_path / "heads"
    first = train_heads(
        model,
        corpus,
        horizon=3,
        steps=40,
        batch_size=4,
        seq_len=32,
        lr=3e-2,
        output_dir=out,
        checkpoint_every=20,
        progress=False,
    )
    assert first.steps == 40 and len(first.accuracies[0]) == 2
    assert sum(first.losses[-8:]) / 8 < sum(first.losses[:8]) / 8 - 0.1
    assert json.loads((out / "config.json").read_text())["horizon"] == 3
    assert all(not p.requires_grad for p in model.parameters())
    more = train_heads(model, corpus, steps=44, batch_size=4, seq_len=32, output_dir=out, progress=False)
    assert more.steps == 44 and len(more.losses) == 4  # resumed at step 40
    loaded = dlhf.DraftHeads.from_pretrained(out, model)
    for a, b in zip(loaded.parameters(), more.heads.parameters()):
        assert torch.equal(a, b)


def test_self_distillation_targets_are_own_continuations(model_dir):
    folder, corpus = model_dir
    model = load(folder)
    chunks = torch.randint(0, model.config.vocab_size, (3, 20), generator=torch.Generator().manual_seed(1))
    got = _own_continuations(model, chunks, 8)
    expected = model.generate(chunks[:, :8], max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert expected.shape == (3, 20)
    assert torch.equal(got, expected)
    result = train_heads(
        model, corpus, horizon=3, steps=3, batch_size=2, seq_len=24, targets="greedy", prompt_len=8, progress=False
    )
    assert result.steps == 3
    result = train_heads(
        model, corpus, horizon=3, steps=2, batch_size=2, seq_len=24, targets="sampled", prompt_len=8, progress=False
    )
    assert result.steps == 2
    with pytest.raises(ValueError, match="targets"):
        train_heads(model, corpus, targets="teacher", progress=False)


def test_cli_train_heads_and_lm_build_over_the_model_tokenizer(model_dir, tmp_path, capsys):
    folder, corpus = model_dir
    out = tmp_path / "cli-heads"
    assert (
        main(
            [
                "hf",
                "train-heads",
                str(folder),
                "--data",
                str(corpus),
                "--horizon",
                "3",
                "-o",
                str(out),
                "--steps",
                "5",
                "--batch-size",
                "2",
                "--seq-len",
                "16",
            ]
        )
        == 0
    )
    assert "top-1 accuracy head2=" in capsys.readouterr().out
    model = load(folder)
    heads = dlhf.DraftHeads.from_pretrained(out, model)

    lm_path = tmp_path / "lm.arpa"
    assert main(["lm", "build", str(corpus), "--tokenizer", str(folder), "--order", "3", "-o", str(lm_path)]) == 0
    lm = NgramLM(lm_path)
    assert dict(lm.metadata)["draftlattice-tokenizer-sha256"] == dlhf.model_tokenizer_sha256(model)
    ids = torch.tensor([[5, 60, 70, 80]])
    expected = model.generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=0, eos_token_id=None)
    got = model.generate(
        ids,
        max_new_tokens=10,
        do_sample=False,
        pad_token_id=0,
        eos_token_id=None,
        custom_generate=dlhf.generate,
        draft_heads=heads,
        draft_lm=lm,
    )
    assert got.tolist() == expected.tolist()

    # An LM over another tokenizer is refused.
    train_tokenizer([corpus], 300, tmp_path / "other.json")
    build_lm(corpus, 2, out_path=tmp_path / "other.arpa", tokenizer=tmp_path / "other.json")
    with pytest.raises(TokenizerMismatchError, match="sha256"):
        model.generate(
            ids,
            max_new_tokens=4,
            custom_generate=dlhf.generate,
            draft_heads=heads,
            draft_lm=NgramLM(tmp_path / "other.arpa"),
            pad_token_id=0,
        )


def test_time_budget_cuts_the_steps_before_the_log_line_says_them(model_dir, caplog):
    folder, corpus = model_dir
    model = load(folder)
    with caplog.at_level("INFO", logger="draftlattice.training.trainer"):
        result = train_heads(
            model,
            corpus,
            horizon=3,
            steps=1000,
            batch_size=2,
            seq_len=16,
            log_every=10,
            time_budget=0.0,
            progress=False,
        )
    assert result.steps == 11  # 10 timed steps, then the one step a budget always allows
    assert any(r.getMessage().startswith("step 10/11 ") for r in caplog.records)


def test_cli_trains_next_token_heads_and_continues_given_heads(model_dir, tmp_path, capsys):
    """`--next-token` (and `--draft-vocab`) write heads of format version 2; `--init-heads` starts from given heads
    (with --lr 0 they come back unchanged: the run really started from them)."""
    folder, corpus = model_dir
    common = ["--data", str(corpus), "--horizon", "3", "--batch-size", "2", "--seq-len", "16", "--steps", "3"]
    first = tmp_path / "next"
    assert (
        main(
            [
                "hf",
                "train-heads",
                str(folder),
                *common,
                "--next-token",
                "--warmup",
                "2",
                "--draft-vocab",
                "50",
                "-o",
                str(first),
            ]
        )
        == 0
    )
    config = json.loads((first / "config.json").read_text())
    assert config["version"] == 2 and config["draft_vocab_size"] == 50
    second = tmp_path / "continued"
    assert (
        main(["hf", "train-heads", str(folder), *common, "--init-heads", str(first), "--lr", "0", "-o", str(second)])
        == 0
    )
    model = load(folder)
    before, after = (dlhf.DraftHeads.from_pretrained(f, model) for f in (first, second))
    assert after.reads_next_token
    for a, b in zip(before.state_dict().values(), after.state_dict().values()):
        torch.testing.assert_close(a, b)
    # a longer --horizon: the given heads, then a new one (still the model's law: --lr 0)
    common[common.index("--horizon") + 1] = "4"
    longer = tmp_path / "longer"
    assert (
        main(["hf", "train-heads", str(folder), *common, "--init-heads", str(first), "--lr", "0", "-o", str(longer)])
        == 0
    )
    grown = dlhf.DraftHeads.from_pretrained(longer, model)
    assert grown.horizon == 4 and grown.draft_vocab.tolist() == before.draft_vocab.tolist()
    for a, b in zip(before.heads.state_dict().values(), list(grown.heads.state_dict().values())):
        torch.testing.assert_close(a, b)
    assert not grown.heads[2].down.weight.any()  # the new head: zero residual
    common[common.index("--horizon") + 1] = "2"
    short = tmp_path / "short"
    assert main(["hf", "train-heads", str(folder), *common, "--init-heads", str(first), "-o", str(short)]) != 0
    assert "--horizon 2 is below the --init-heads' own (3)" in capsys.readouterr().err
    assert not short.exists()


def test_the_models_tokenizer_hash_reads_the_file_once_per_version(model_dir, tmp_path, monkeypatch):
    """generate() checks its LM on every call: the hash of the model's tokenizer.json must not
    parse the tokenizer (0.12 s on the default model), and must follow the file when it changes."""
    import shutil

    from draftlattice.tokenizer import tokenizer_sha256

    folder, corpus = model_dir
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    model = load(copy)

    def no_parsing(path):
        raise AssertionError(f"parsed {path}")

    monkeypatch.setattr("draftlattice.tokenizer.load_tokenizer", no_parsing)
    first = dlhf.model_tokenizer_sha256(model)
    assert first == tokenizer_sha256(copy / "tokenizer.json")
    train_tokenizer([corpus], 280, tmp_path / "other.json")
    shutil.copyfile(tmp_path / "other.json", copy / "tokenizer.json")
    changed = dlhf.model_tokenizer_sha256(model)
    assert changed == tokenizer_sha256(copy / "tokenizer.json") != first


def _random_heads_on_random_tokens(model_dir, shape):
    """(float32 model, h = 4 heads with small random weights, random token ids ``shape``, their
    trunk states), seeded."""
    model = load(model_dir[0]).float()
    heads = dlhf.DraftHeads.for_model(model, horizon=4).float()
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in heads.parameters():
            parameter.normal_(0, 0.05)
        chunks = torch.randint(0, model.config.vocab_size, shape)
        z = model.base_model(input_ids=chunks).last_hidden_state
    return model, heads, chunks, z


def test_a_heads_teacher_is_the_models_own_law_for_the_same_token(model_dir):
    """With teacher_weight = 1, head j at t learns the model's law at t + j - 1 (the state that
    predicts token t + j), through the same output layer."""
    from draftlattice.training.trainer import head_losses

    model, heads, chunks, z = _random_heads_on_random_tokens(model_dir, (2, 11))
    with torch.no_grad():
        loss, _ = head_losses(heads, model, z, chunks, teacher_weight=1.0)
        lm_head, T, want = model.get_output_embeddings(), chunks.shape[1], []
        for i, head in enumerate(heads.heads):
            j = i + 2
            law = torch.softmax(lm_head(z[:, j - 1 : T - 1]), -1)
            student = torch.log_softmax(lm_head(head(z[:, : T - j])), -1)
            want.append(-(law * student).sum(-1).mean())
    torch.testing.assert_close(loss, torch.stack(want).mean(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="teacher_weight must be a number in \\[0, 1\\], got -0.1"):
        train_heads(model, chunks.reshape(-1), steps=1, seq_len=8, teacher_weight=-0.1)


@pytest.mark.parametrize("gate_weight", [1.0, 0.4])
def test_a_prefix_gated_head_learns_only_where_the_earlier_heads_had_their_tokens(model_dir, gate_weight):
    """Head j's loss at t is weighed by prod over heads i < j of [target rank < k at t] (gated
    share ``gate_weight``), the mean still over every position: checked against explicit logits."""
    from draftlattice.training.prefix_gate import PrefixGate
    from draftlattice.training.trainer import head_losses

    model, heads, chunks, z = _random_heads_on_random_tokens(model_dir, (3, 13))
    with torch.no_grad():
        k = model.config.vocab_size // 2  # random heads: about half the paths survive each head
        gate = PrefixGate(k=k, weight=gate_weight)
        loss, _ = head_losses(heads, model, z, chunks, prefix_gate=gate)
        lm_head, T, want = model.get_output_embeddings(), chunks.shape[1], []
        alive = torch.ones(chunks.shape)
        for i, head in enumerate(heads.heads):
            j = i + 2
            logits = lm_head(head(z[:, : T - j]))
            gold = chunks[:, j:]
            ce = -torch.log_softmax(logits, -1).gather(-1, gold[..., None]).squeeze(-1)
            want.append((((1 - gate_weight) + gate_weight * alive[:, : T - j]) * ce).mean())
            rank = (logits > logits.gather(-1, gold[..., None])).sum(-1)
            alive[:, : T - j] *= (rank < k).float()
        assert 0 < alive[:, : T - 4].mean() < 1  # some paths die: the gate is not a no-op here
    torch.testing.assert_close(loss, torch.stack(want).mean(), rtol=1e-4, atol=1e-5)
    assert not torch.allclose(loss, head_losses(heads, model, z, chunks)[0])


def test_a_prefix_gate_names_its_bad_options(model_dir):
    from draftlattice.training.prefix_gate import PrefixGate

    with pytest.raises(ValueError, match="prefix gate k must be a positive int, got 0"):
        PrefixGate(k=0)
    with pytest.raises(ValueError, match="prefix gate weight must be a number in \\[0, 1\\], got 2"):
        PrefixGate(weight=2)
    model = load(model_dir[0])
    with pytest.raises(ValueError, match="prefix_gate must be a PrefixGate or None, got 8"):
        train_heads(model, torch.arange(50) % 7, steps=1, seq_len=8, prefix_gate=8)
