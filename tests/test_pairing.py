"""draftlattice.pairing: an n-gram LM must record the model's tokenizer; --allow-mismatch is the
explicit escape; a model's tokenizer must not emit ids past its vocabulary. Checked in the library
functions and through `eval`, `model perplexity`, `trace record` and `demo`."""

from __future__ import annotations

import json
import logging
import shutil

import pytest

from _hf_models import fetched_default_model
from _tiny_target import tiny_target
from arpa_writer import random_arpa
from draftlattice.cli.main import main
from draftlattice.ngram.build import TOKENIZER_SHA256_KEY
from draftlattice.pairing import TokenizerMismatchError, check_lm_tokenizer_pair, check_same_tokenizer
from draftlattice.tokenizer import tokenizer_sha256, train_tokenizer

SHA = "1f" * 32  # a tokenizer.json's sha256, as an LM records it
OTHER_SHA = "0" * 64


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory, one_thread):
    """A tiny target folder (its own tokenizer and a 3-gram LM over it), and two token-id LMs:
    one that records another tokenizer, one that records none (as a word-level LM would)."""
    out = tmp_path_factory.mktemp("pairing")
    target = tiny_target(out / "target")
    random_arpa(out / "foreign.arpa", 2, 1, n_words=50, metadata={TOKENIZER_SHA256_KEY: OTHER_SHA})
    random_arpa(out / "words.arpa", 2, 2, n_words=50)
    prompts = out / "prompts.txt"
    prompts.write_text(
        "The tower is 324 metres tall, about the same height as an 81-storey building.\n"
        "In 1889 the exhibition opened in Paris and drew many visitors.\n"
    )
    return out, target, prompts


def test_matching_hash_passes_and_case_does_not_matter():
    check_lm_tokenizer_pair({TOKENIZER_SHA256_KEY: SHA.upper()}, SHA, lm_name="lm", tokenizer_name="tok")


@pytest.mark.parametrize(
    ("metadata", "sha", "message"),
    [
        (
            {TOKENIZER_SHA256_KEY: OTHER_SHA},
            SHA,
            f"lm was built over tokenizer sha256 {OTHER_SHA}, but tok has sha256 {SHA}",
        ),
        ({}, SHA, "lm records no tokenizer"),
        ({TOKENIZER_SHA256_KEY: SHA}, None, "the tokenizer of tok is unknown"),
    ],
)
def test_mismatch_is_an_error_unless_allowed(metadata, sha, message, caplog):
    with pytest.raises(TokenizerMismatchError, match="--allow-mismatch") as error:
        check_lm_tokenizer_pair(metadata, sha, lm_name="lm", tokenizer_name="tok")
    assert message in str(error.value)
    assert isinstance(error.value, ValueError)
    with caplog.at_level(logging.WARNING, logger="draftlattice.pairing"):
        check_lm_tokenizer_pair(metadata, sha, lm_name="lm", tokenizer_name="tok", allow_mismatch=True)
    assert message in caplog.text


def test_a_second_model_must_share_the_tokenizer(tmp_path):
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text('{"model": {"vocab": {"a": 0}}}')
    sha = tokenizer_sha256(tokenizer)
    check_same_tokenizer(sha, tokenizer, owner="rescorer")
    other = tmp_path / "other.json"
    other.write_bytes(tokenizer.read_bytes() + b"\n")
    with pytest.raises(TokenizerMismatchError, match="rescorer uses tokenizer"):
        check_same_tokenizer(sha, other, owner="rescorer")
    check_same_tokenizer(sha, other, owner="rescorer", allow_mismatch=True)


def record(folder, prompts, out) -> list[str]:
    args = ["--prompts", str(prompts), "--prompt-tokens", "8", "--max-new-tokens", "8", "--top-k", "4"]
    return ["trace", "record", "--model", str(folder), *args, "-o", str(out)]


def test_eval_refuses_a_mismatched_lm_and_allows_it_on_request(tiny_models, capsys):
    out, target, prompts = tiny_models
    trace = out / "t.dltrace"
    assert main(record(target.folder, prompts, trace)) == 0
    capsys.readouterr()
    grid = ["--trace", str(trace), "--k", "4", "--p", "2", "--ks", "1", "--ps", "1", "--no-adaptive"]
    assert main(["eval", *grid, "--lm", str(target.lm)]) == 0  # the LM built over the target's tokenizer
    assert "Table 4" in capsys.readouterr().out
    for lm, message in (
        (out / "foreign.arpa", f"built over tokenizer sha256 {OTHER_SHA}"),
        (out / "words.arpa", "records no tokenizer"),
    ):
        args = ["eval", *grid, "--lm", str(lm)]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert message in err and "--allow-mismatch" in err
        assert main([*args, "--allow-mismatch"]) == 0
        assert "Table 4" in capsys.readouterr().out


def test_perplexity_refuses_a_mismatched_lm(tiny_models, tmp_path, capsys):
    out, target, prompts = tiny_models
    args = ["model", "perplexity", "--model", str(target.folder), "--text", str(prompts), "--json"]
    assert main([*args, "--lm", str(out / "foreign.arpa")]) == 1
    err = capsys.readouterr().err
    assert f"built over tokenizer sha256 {OTHER_SHA}" in err and "--allow-mismatch" in err
    assert main([*args, "--lm", str(out / "foreign.arpa"), "--allow-mismatch"]) == 0
    # its vocabulary misses the target's ids: an infinite perplexity, not a crash
    assert json.loads(capsys.readouterr().out)["lms"][str(out / "foreign.arpa")] > 1


def test_a_tokenizer_larger_than_the_model_is_refused(tiny_models, tmp_path, capsys):
    """A target folder whose tokenizer can emit ids the model has no embedding for."""
    _, target, prompts = tiny_models
    folder = tmp_path / "target"
    shutil.copytree(target.folder / "model", folder / "model")
    shutil.copytree(target.folder / "heads", folder / "heads")
    bigger = train_tokenizer([target.corpus], 400, folder / "model" / "tokenizer.json")
    assert bigger.get_vocab_size() > target.model.config.vocab_size
    assert main(record(folder, prompts, tmp_path / "t.dltrace")) == 1
    assert f"has {bigger.get_vocab_size()} tokens, the model only {target.model.config.vocab_size}" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "t.dltrace").exists()


def test_demo_refuses_a_mismatched_lm(tiny_models, capsys):
    fetched_default_model()
    out = tiny_models[0]
    assert main(["demo", "--lm", str(out / "foreign.arpa"), "--quick"]) == 1  # the default model
    assert f"built over tokenizer sha256 {OTHER_SHA}" in capsys.readouterr().err
