"""The trunk-feature cache of a distilled corpus, and training the heads from it."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from draftlattice.distilled_corpus import FORMAT, META, VERSION, DistilledCorpus, write_shard
from draftlattice.training import feature_cache as fc
from draftlattice.training import train_heads
from draftlattice.training.feature_cache import FeatureCache
from draftlattice.training.head_loss import CandidateSoftmax

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(seed: int = 0):
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=61, n_embd=16, n_layer=2, n_head=2, n_positions=64, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).eval()


def tiny_corpus(folder, records: int = 23, seed: int = 0) -> DistilledCorpus:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    (folder / META).write_text(json.dumps({"format": FORMAT, "version": VERSION, "model": "tiny", "mode": "greedy"}))
    rows = []
    for _ in range(records):
        prompt = int(rng.integers(1, 6))
        n = int(rng.integers(prompt + 1, 40))
        rows.append(((np.arange(n) * 3 + rng.integers(0, 61)) % 61, prompt))  # learnable: +3 each step
    write_shard(folder / "shard-00000.npz", rows[:10])
    write_shard(folder / "shard-00001.npz", rows[10:])
    return DistilledCorpus.load(folder)


def trunk(model, corpus, r, max_len):
    record = torch.from_numpy(corpus.record(r)[:max_len].astype(np.int64))[None]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        return model.base_model(input_ids=record).last_hidden_state[0].to(torch.bfloat16)


def test_cache_holds_the_trunk_states_of_learnt_positions(tmp_path, caplog, monkeypatch):
    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus")
    clock = iter(range(0, 10**6, 10))  # 10 s between readings: a slow trunk, for the ETA
    monkeypatch.setattr(fc.time, "monotonic", lambda: next(clock))
    with caplog.at_level(logging.INFO, logger="draftlattice.training.feature_cache"):
        cache = FeatureCache.build(
            tmp_path / "f", model, corpus, max_len=32, batch_tokens=64, progress=False, log_every=0
        )
    lines = [r.getMessage() for r in caplog.records if "ETA" in r.getMessage()]
    assert len(lines) > 2 and lines[-1].startswith(f"trunk features: {len(corpus)}/{len(corpus)} records")
    etas = [int(line.split("ETA ")[1][:-4].split("m")[0]) * 60 + int(line[-3:-1]) for line in lines]
    assert etas[0] > 0 and etas[-1] == 0 and etas == sorted(etas, reverse=True)
    rows = np.array([3, 0, 7])
    width = int(np.minimum(np.diff(corpus.offsets), 32)[rows].max())
    z = cache.rows(rows, width)
    assert z.shape == (3, width, 16) and z.dtype == torch.bfloat16
    for b, r in enumerate(rows):
        want = trunk(model, corpus, int(r), 32)
        start, n = int(corpus.prompt_lens[r]) - 1, len(want)
        torch.testing.assert_close(z[b, start:n].float(), want[start:].float(), rtol=0.02, atol=0.02)
        assert not z[b, :start].any() and not z[b, n:].any()
    assert FeatureCache.open(tmp_path / "f", corpus, model).meta["rows"] == cache.meta["rows"]


def test_an_interrupted_build_resumes(tmp_path, monkeypatch):
    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus")
    whole = FeatureCache.build(tmp_path / "whole", model, corpus, max_len=32, batch_tokens=64, progress=False)
    calls = {"n": 0}
    real = fc._write_progress

    def stop_after_two(folder, records):
        real(folder, records)
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(fc, "_write_progress", stop_after_two)
    with pytest.raises(KeyboardInterrupt):
        FeatureCache.build(tmp_path / "part", model, corpus, max_len=32, batch_tokens=64, progress=False)
    done = json.loads((tmp_path / "part" / fc.PROGRESS).read_text())["records"]
    assert 0 < done < len(corpus)
    with pytest.raises(ValueError, match="not finished"):
        FeatureCache.open(tmp_path / "part", corpus)
    monkeypatch.setattr(fc, "_write_progress", real)
    seen = []
    monkeypatch.setattr(fc, "_write_progress", lambda folder, records: seen.append(records) or real(folder, records))
    resumed = FeatureCache.build(tmp_path / "part", model, corpus, max_len=32, batch_tokens=64, progress=False)
    assert seen[0] > done  # the first batch after the interruption, not from zero
    assert np.array_equal(np.asarray(resumed.data), np.asarray(whole.data))
    seen.clear()
    FeatureCache.build(tmp_path / "part", model, corpus, max_len=32, batch_tokens=64, progress=False)
    assert seen == []  # complete: nothing recomputed


def first_shard_of(folder, into) -> DistilledCorpus:
    """The corpus of ``folder``'s first shard alone: what a corpus was before it grew."""
    into.mkdir()
    for name in (META, "shard-00000.npz"):
        shutil.copy(folder / name, into / name)
    return DistilledCorpus.load(into)


def test_a_grown_corpus_extends_its_cache_and_runs_the_trunk_on_new_records_only(tmp_path, monkeypatch, caplog):
    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus")
    prefix = first_shard_of(tmp_path / "corpus", tmp_path / "prefix")
    built = FeatureCache.build(tmp_path / "f", model, prefix, max_len=32, batch_tokens=64, progress=False)
    kept = np.asarray(built.data).copy()
    ran = []
    model_trunk = fc._model_trunk

    def counting(model):
        run = model_trunk(model)
        return lambda tokens: ran.append(tokens.shape[0]) or run(tokens)

    monkeypatch.setattr(fc, "_model_trunk", counting)
    with caplog.at_level(logging.INFO, logger="draftlattice.training.feature_cache"):
        grown = FeatureCache.build(tmp_path / "f", model, corpus, max_len=32, batch_tokens=64, progress=False)
    assert any("extending the trunk features" in r.getMessage() for r in caplog.records)
    assert sum(ran) == len(corpus) - len(prefix)  # the first shard's records never ran again
    assert grown.meta["segments"] == [len(prefix), len(corpus)]
    assert np.array_equal(np.asarray(grown.data)[: len(kept)], kept)
    for r in range(len(corpus)):  # every record's rows, old and new, are the trunk's states
        want = trunk(model, corpus, r, 32)
        start = int(corpus.prompt_lens[r]) - 1
        got = grown.rows(np.array([r]), len(want))[0]
        torch.testing.assert_close(got[start:].float(), want[start:].float(), rtol=0.02, atol=0.02)
    assert FeatureCache.open(tmp_path / "f", corpus, model).meta["segments"] == [len(prefix), len(corpus)]
    with pytest.raises(ValueError, match="another corpus"):  # the cache never shrinks back
        FeatureCache.open(tmp_path / "f", prefix)
    ran.clear()
    FeatureCache.build(tmp_path / "f", model, corpus, max_len=32, batch_tokens=64, progress=False)
    assert ran == []


def test_an_extension_interrupted_anywhere_resumes(tmp_path, monkeypatch):
    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus")
    prefix = first_shard_of(tmp_path / "corpus", tmp_path / "prefix")
    FeatureCache.build(tmp_path / "f", model, prefix, max_len=32, batch_tokens=64, progress=False)
    real_meta = fc._write_meta

    def crash(folder, meta):  # the file has grown, the meta is still the prefix's
        raise KeyboardInterrupt

    monkeypatch.setattr(fc, "_write_meta", crash)
    with pytest.raises(KeyboardInterrupt):
        FeatureCache.build(tmp_path / "f", model, corpus, max_len=32, batch_tokens=64, progress=False)
    monkeypatch.setattr(fc, "_write_meta", real_meta)
    assert FeatureCache.open(tmp_path / "f", prefix, model).meta["rows"] < (tmp_path / "f" / fc.DATA).stat().st_size
    real_progress = fc._write_progress

    def stop_after_one(folder, records):
        real_progress(folder, records)
        raise KeyboardInterrupt

    monkeypatch.setattr(fc, "_write_progress", stop_after_one)
    with pytest.raises(KeyboardInterrupt):
        FeatureCache.build(tmp_path / "f", model, corpus, max_len=32, batch_tokens=64, progress=False)
    done = json.loads((tmp_path / "f" / fc.PROGRESS).read_text())["records"]
    assert len(prefix) < done < len(corpus)
    monkeypatch.setattr(fc, "_write_progress", real_progress)
    resumed = FeatureCache.build(tmp_path / "f", model, corpus, max_len=32, batch_tokens=64, progress=False)
    whole = FeatureCache.build(tmp_path / "w", model, prefix, max_len=32, batch_tokens=64, progress=False)
    whole = FeatureCache.build(tmp_path / "w", model, corpus, max_len=32, batch_tokens=64, progress=False)
    assert resumed.meta["segments"] == whole.meta["segments"] == [len(prefix), len(corpus)]
    assert np.array_equal(np.asarray(resumed.data), np.asarray(whole.data))  # the same batches: the same bits


def test_a_corpus_that_differs_before_its_end_is_not_an_extension(tmp_path):
    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus")
    tiny_corpus(tmp_path / "other", seed=1)
    other = first_shard_of(tmp_path / "other", tmp_path / "other-first")
    FeatureCache.build(tmp_path / "f", model, other, max_len=32, progress=False)
    with pytest.raises(ValueError, match="another corpus"):
        FeatureCache.build(tmp_path / "f", model, corpus, max_len=32, progress=False)
    with pytest.raises(ValueError, match="another model"):  # a prefix, but of another model's features
        FeatureCache.build(tmp_path / "f", tiny_model(seed=1), DistilledCorpus.load(tmp_path / "other"), max_len=32)


def test_never_overwrites_what_is_not_its_own(tmp_path):
    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus")
    (tmp_path / "file").write_text("mine")
    with pytest.raises(ValueError, match="is a file"):
        FeatureCache.build(tmp_path / "file", model, corpus, progress=False)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "notes.txt").write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(ValueError, match="not empty and holds no feature cache"):
            FeatureCache.build(tmp_path / "dir", model, corpus, overwrite=overwrite, progress=False)
    assert (tmp_path / "file").read_text() == "mine" and (tmp_path / "dir" / "notes.txt").read_text() == "mine"


def test_another_model_or_corpus_is_a_clear_error_unless_overwrite(tmp_path):
    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus")
    folder = tmp_path / "f"
    FeatureCache.build(folder, model, corpus, max_len=32, progress=False)
    with pytest.raises(ValueError, match="another model .*overwrite"):
        FeatureCache.build(folder, tiny_model(seed=1), corpus, max_len=32, progress=False)
    other = tiny_corpus(tmp_path / "other", seed=1)
    with pytest.raises(ValueError, match="another corpus"):
        FeatureCache.build(folder, model, other, max_len=32, progress=False)
    with pytest.raises(ValueError, match="another corpus"):
        FeatureCache.open(folder, other)
    with pytest.raises(ValueError, match="max_len"):
        FeatureCache.build(folder, model, corpus, max_len=16, progress=False)
    rebuilt = FeatureCache.build(folder, model, other, max_len=32, overwrite=True, progress=False)
    assert rebuilt.meta["corpus"] == fc.corpus_fingerprint(other)
    assert FeatureCache.open(folder, other, model) is not None


def test_training_from_cached_features_matches_the_trunk(tmp_path):
    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus", records=60)
    common = dict(horizon=3, steps=6, batch_tokens=96, seq_len=32, lr=3e-2, progress=False)
    torch.manual_seed(0)  # the same new heads in both runs
    plain = train_heads(model, corpus, **common)
    torch.manual_seed(0)
    cached = train_heads(model, corpus, features=tmp_path / "f", **common)
    np.testing.assert_allclose(cached.losses, plain.losses, rtol=2e-3)  # bf16 rounding of other batch shapes
    with pytest.raises(ValueError, match="need a distilled corpus"):
        train_heads(model, torch.arange(200) % 61, features=tmp_path / "g", steps=1, progress=False)


def test_candidate_softmax_training_learns(tmp_path):
    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus", records=60)
    softmax = CandidateSoftmax(frequent=8, negatives=8)
    result = train_heads(
        model, corpus, horizon=3, steps=40, batch_tokens=96, seq_len=32, lr=3e-2, softmax=softmax, progress=False
    )
    assert sum(result.losses[-8:]) / 8 < sum(result.losses[:8]) / 8 - 0.1
    from draftlattice.training import head_accuracy

    accuracy = head_accuracy(model, result.heads, corpus, ks=(1,))  # full softmax
    assert all(0.0 <= row["top1"] <= 1.0 for row in accuracy)


def test_cli_trains_with_candidate_softmax_and_cached_features(tmp_path, capsys):
    from draftlattice.cli.main import main

    tiny_model().save_pretrained(tmp_path / "model")
    tiny_corpus(tmp_path / "corpus", records=30)
    args = ["hf", "train-heads", str(tmp_path / "model"), "--data", str(tmp_path / "corpus"), "--horizon", "3"]
    args += ["--steps", "3", "--batch-tokens", "96", "--seq-len", "32", "-o", str(tmp_path / "heads")]
    args += ["--candidate-softmax", "--frequent", "8", "--negatives", "8", "--features", str(tmp_path / "f")]
    assert main(args) == 0
    assert "3 steps" in capsys.readouterr().out
    assert json.loads((tmp_path / "f" / fc.PROGRESS).read_text())["records"] == 30


def test_a_resumed_run_with_both_options_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    from draftlattice.training import trainer

    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus", records=60)
    common = dict(horizon=3, steps=6, batch_tokens=96, seq_len=32, lr=3e-2, progress=False, features=tmp_path / "f")
    common["softmax"] = CandidateSoftmax(frequent=4, negatives=6)
    torch.manual_seed(0)  # new heads draw their first layer from torch's generator
    straight = train_heads(model, corpus, **common)
    real = trainer._checkpoint

    def interrupted(*args):
        real(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "_checkpoint", interrupted)
    torch.manual_seed(0)
    with pytest.raises(KeyboardInterrupt):  # stopped right after the checkpoint at step 3
        train_heads(model, corpus, output_dir=tmp_path / "run", checkpoint_every=3, **common)
    monkeypatch.setattr(trainer, "_checkpoint", real)
    resumed = train_heads(model, corpus, output_dir=tmp_path / "run", **common)
    assert resumed.steps == 6 and resumed.losses == pytest.approx(straight.losses[3:], rel=1e-6)
    for a, b in zip(resumed.heads.parameters(), straight.heads.parameters()):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("weights", ["dense", "int4"])
def test_a_lean_step_computes_the_states_the_heads_read_on_it(tmp_path, weights):
    """With step=, the cache holds the lean step's hidden states (in its format: what the heads
    read when they draft on it), each record as the step computes it alone (up to bf16 rounding:
    PyTorch's products round with the batch's shape); its format is part of the fingerprint, so
    the model's own features are never taken for them."""
    from _hf_models import llama
    from draftlattice.lean import LeanLlama

    model = llama(seed=2, vocab=61, hidden_size=64, intermediate_size=96).to(torch.bfloat16)
    corpus = tiny_corpus(tmp_path / "corpus")
    step = LeanLlama(model, weights)
    cache = FeatureCache.build(tmp_path / "f", model, corpus, max_len=32, batch_tokens=64, progress=False, step=step)
    assert cache.meta["model"]["step"] == f"lean {weights}"
    rows = np.arange(len(corpus))
    z = cache.rows(rows, int(np.minimum(np.diff(corpus.offsets), 32).max()))
    for r in rows.tolist():
        record = torch.from_numpy(corpus.record(r)[:32].astype(np.int64))[None]
        positions = torch.arange(record.shape[1]).unsqueeze(0)
        with torch.inference_mode():
            want = step.hidden(record, positions, None, step.new_cache(1, record.shape[1]))[0]
        start = int(corpus.prompt_lens[r]) - 1
        torch.testing.assert_close(z[r, start : len(want)].float(), want[start:].float(), rtol=0.02, atol=0.02)
    with pytest.raises(ValueError, match="holds features of another model"):
        FeatureCache.build(tmp_path / "f", model, corpus, max_len=32, batch_tokens=64, progress=False)
    with pytest.raises(ValueError, match="holds features of another model"):
        FeatureCache.open(tmp_path / "f", corpus, model)
    assert FeatureCache.open(tmp_path / "f", corpus, model, step).meta["rows"] == cache.meta["rows"]
    with pytest.raises(ValueError, match="step computes the cached features: it needs features="):
        train_heads(model, corpus, steps=1, feature_step=step)


def test_held_out_path_accuracy_counts_positions_every_earlier_head_also_holds(tmp_path):
    """``path{k}`` of head j: positions where heads 2..j all rank their tokens in their top k,
    recomputed here from the same batch (one batch holds the whole corpus)."""
    from draftlattice.hf.heads import DraftHeads
    from draftlattice.training import head_accuracy
    from draftlattice.training.batches import RecordBatches

    model, corpus = tiny_model(), tiny_corpus(tmp_path / "corpus", records=12)
    torch.manual_seed(1)
    heads = DraftHeads.for_model(model, horizon=4).float()
    ks = (1, 8, 30)
    rows = head_accuracy(model, heads, corpus, ks=ks, batch_tokens=4096)
    tokens, valid = RecordBatches(corpus, 4096, 1024, seed=0).next()
    T = tokens.shape[1]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        z = model.base_model(input_ids=tokens).last_hidden_state
        alive = {k: torch.ones(tokens.shape, dtype=torch.bool) for k in ks}
        for row, head in zip(rows, heads.heads):
            j = row["head"]
            keep = valid[:, j:] & valid[:, 1 : T - j + 1]
            logits = (head(z[:, : T - j][keep]).to(torch.bfloat16) @ model.lm_head.weight.to(torch.bfloat16).T).float()
            gold = tokens[:, j:][keep]
            rank = (logits > logits.gather(1, gold[:, None])).sum(1)
            for k in ks:
                span = alive[k][:, : T - j]
                span[keep] &= rank < k
                assert row[f"path{k}"] == pytest.approx(float(span[keep].float().mean()))
                assert row[f"path{k}"] <= row[f"top{k}"] + 1e-9  # top-k: a float32 mean
    assert [row["path1"] for row in rows] == sorted((row["path1"] for row in rows), reverse=True)
    assert rows[0]["path8"] == pytest.approx(rows[0]["top8"]) and 0 < rows[2]["path30"] < rows[2]["top30"]
