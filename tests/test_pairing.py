"""draftlattice.pairing: an n-gram LM must record the model's tokenizer; --allow-mismatch is the
explicit escape. Checked in the library function and through `eval` and `demo`."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from arpa_writer import random_arpa
from draftlattice.cli.main import main
from draftlattice.model import BlockwiseConfig, BlockwiseLM
from draftlattice.ngram.build import TOKENIZER_SHA256_KEY
from draftlattice.pairing import TokenizerMismatchError, check_lm_tokenizer_pair, check_same_tokenizer
from draftlattice.tokenizer import tokenizer_sha256

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / "lm_models" / "tokenizer.json"
SHA = tokenizer_sha256(TOKENIZER)
OTHER_SHA = "0" * 64


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
    check_same_tokenizer(SHA, TOKENIZER, owner="rescorer")
    other = tmp_path / "tokenizer.json"
    other.write_bytes(TOKENIZER.read_bytes() + b"\n")
    with pytest.raises(TokenizerMismatchError, match="rescorer uses tokenizer"):
        check_same_tokenizer(SHA, other, owner="rescorer")
    check_same_tokenizer(SHA, other, owner="rescorer", allow_mismatch=True)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """A random 3-head model over the shipped tokenizer, and two token-id LMs: one that records
    another tokenizer, one that records none (as a word-level LM would)."""
    out = tmp_path_factory.mktemp("pairing")
    torch.manual_seed(0)
    config = BlockwiseConfig(
        vocab_size=4096, n_layer=1, n_head=2, d_model=32, d_ff=64, num_heads=3, max_seq_len=128, head_hidden=32
    )
    BlockwiseLM(config).save_pretrained(out / "default", tokenizer_path=TOKENIZER)
    random_arpa(out / "foreign.arpa", 2, 1, n_words=50, metadata={TOKENIZER_SHA256_KEY: OTHER_SHA})
    random_arpa(out / "words.arpa", 2, 2, n_words=50)
    prompts = out / "prompts.txt"
    prompts.write_text(
        "The tower is 324 metres tall, about the same height as an 81-storey building.\n"
        "In 1889 the exhibition opened in Paris and drew many visitors.\n"
    )
    return out, prompts


def test_eval_refuses_a_mismatched_lm_and_allows_it_on_request(tiny_models, capsys):
    out, prompts = tiny_models
    trace = out / "t.dltrace"
    assert (
        main(
            [
                "trace",
                "record",
                "--model",
                str(out / "default"),
                "--prompts",
                str(prompts),
                "--prompt-tokens",
                "8",
                "--max-new-tokens",
                "8",
                "--top-k",
                "4",
                "-o",
                str(trace),
            ]
        )
        == 0
    )
    capsys.readouterr()
    for lm, message in (
        (out / "foreign.arpa", f"built over tokenizer sha256 {OTHER_SHA}"),
        (out / "words.arpa", "records no tokenizer"),
    ):
        args = [
            "eval",
            "--trace",
            str(trace),
            "--lm",
            str(lm),
            "--k",
            "4",
            "--p",
            "2",
            "--ks",
            "1",
            "--ps",
            "1",
            "--no-adaptive",
        ]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert message in err and "--allow-mismatch" in err
        assert main([*args, "--allow-mismatch"]) == 0
        assert "Table 4" in capsys.readouterr().out


def test_demo_refuses_a_mismatched_lm(tiny_models, capsys):
    out, _ = tiny_models
    assert main(["demo", "--lm", str(out / "foreign.arpa"), "--quick"]) == 1  # the default model
    assert f"built over tokenizer sha256 {OTHER_SHA}" in capsys.readouterr().err
