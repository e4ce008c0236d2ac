"""Tiny blockwise models with low-entropy heads for the decoding tests.

Random-weight heads almost never agree with the target, so multi-token acceptance would go
untested. These models are trained for a few seconds on text from a sparse Markov chain (each
token has one likely successor), so heads 2..h learn to look ahead and drafts are often, but not
always, accepted: both acceptance and rollback happen in every test.
"""

from __future__ import annotations

import functools

import pytest
import torch

from draftlattice.model import BlockwiseConfig, BlockwiseLM

VOCAB = 24


def markov_corpus(length: int, seed: int, vocab: int = VOCAB, stay: float = 0.8) -> torch.Tensor:
    """[length] tokens: with probability ``stay`` the token's fixed successor, else a random one."""
    gen = torch.Generator().manual_seed(seed)
    successor = torch.randperm(vocab, generator=gen)
    tokens = [0]
    for _ in range(length - 1):
        if float(torch.rand((), generator=gen)) < stay:
            tokens.append(int(successor[tokens[-1]]))
        else:
            tokens.append(int(torch.randint(vocab, (), generator=gen)))
    return torch.tensor(tokens)


@functools.cache
def trained_model(num_heads: int, seed: int = 0, steps: int = 60, vocab: int = VOCAB) -> BlockwiseLM:
    """A 2-layer BlockwiseLM (d_model 32) with h = num_heads heads, trained on ``markov_corpus``."""
    torch.manual_seed(seed)
    config = BlockwiseConfig(
        vocab_size=vocab,
        n_layer=2,
        n_head=2,
        d_model=32,
        d_ff=64,
        num_heads=num_heads,
        max_seq_len=128,
        head_hidden=32,
    )
    model = BlockwiseLM(config)
    corpus = markov_corpus(20000, seed, vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    window = 16
    gen = torch.Generator().manual_seed(seed)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only add overhead on the shared machine
    try:
        _train(model, corpus, optimizer, steps, window, num_heads, vocab, gen)
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def _train(model, corpus, optimizer, steps, window, num_heads, vocab, gen) -> None:
    for _ in range(steps):
        starts = torch.randint(len(corpus) - window - num_heads, (16,), generator=gen)
        batch = torch.stack([corpus[s : s + window + num_heads] for s in starts])
        inputs = batch[:, :window]
        targets = torch.stack([batch[:, j + 1 : j + 1 + window] for j in range(num_heads)], dim=2)
        logits = model(inputs).logits  # [B, window, h, V]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def prompts(count: int, seed: int, length: int = 6, vocab: int = VOCAB) -> list[list[int]]:
    """Prompts taken from a held-out stretch of the same chain (so heads are in distribution)."""
    corpus = markov_corpus(2000, seed + 1000, vocab)
    return [corpus[i * 50 : i * 50 + length].tolist() for i in range(count)]


@functools.cache
def markov_ngram(directory: str, order: int = 3, seed: int = 0, vocab: int = VOCAB):
    """A Katz n-gram LM (draftlattice.build_lm) over the token ids of ``markov_corpus(seed)``.

    Lines of 20 tokens, words = decimal token ids (the convention of LMs over a model's tokens).
    """
    from pathlib import Path

    from draftlattice import NgramLM
    from draftlattice.ngram.build import build_lm

    tokens = markov_corpus(20000, seed, vocab).tolist()
    corpus = Path(directory) / f"markov-{seed}-{vocab}.txt"
    corpus.write_text("".join(" ".join(map(str, tokens[i : i + 20])) + "\n" for i in range(0, len(tokens), 20)))
    out = Path(directory) / f"markov-{seed}-{vocab}-{order}.arpa"
    build_lm(corpus, order, out_path=out, overwrite=True)
    return NgramLM(out)


@pytest.fixture(scope="session")
def ngram_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("decode-ngram"))
