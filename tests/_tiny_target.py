"""Tiny target folders for the CLI tests (what ``--model`` reads), and heads that draft.

A target folder holds ``model/`` (a transformers causal LM with its ``tokenizer.json``) and
``heads/`` (its :class:`draftlattice.hf.DraftHeads`). :func:`tiny_target` writes one in seconds:
a byte-level BPE tokenizer trained on a few WikiText-2 lines, a random tiny Llama whose
vocabulary is exactly the tokenizer's, heads distilled for a few steps on the model's own greedy
continuations, and a 3-gram LM over the same lines through the tokenizer (it records the
tokenizer's sha256, so `eval` pairs it with the target).

Random heads almost never agree with the target, so multi-token acceptance would go untested;
:func:`distilled_heads` trains heads 2..h on the model's own greedy output for a few dozen
steps: their drafts are often, but not always, accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

import draftlattice.hf as dlhf
from _hf_models import greedy, llama
from draftlattice.assets import data_file

CORPUS_LINES = 400  # WikiText-2 train lines for the tokenizer and the LM
TOKENIZER_VOCAB = 320  # an upper bound: BPE training stops early on a small corpus


def distilled_heads(model, horizon: int = 4, steps: int = 60, prompts: int = 32, new_tokens: int = 40, seed: int = 0):
    """Heads 2..``horizon`` of ``model`` trained ``steps`` Adam steps on its greedy continuations
    of ``prompts`` random 4-token prompts (head j at position i predicts token i + j - 1)."""
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (prompts, 4), generator=torch.Generator().manual_seed(seed))
    sequences = greedy(model, ids, torch.ones_like(ids), max_new_tokens=new_tokens)
    with torch.no_grad():
        hidden = model.base_model(sequences).last_hidden_state
    torch.manual_seed(seed)
    heads = dlhf.DraftHeads.for_model(model, horizon=horizon)
    optimizer = torch.optim.Adam(heads.parameters(), lr=1e-2)
    length = sequences.shape[1]
    for _ in range(steps):
        logits = heads.logits(hidden, model)  # [M, L, h - 1, V]; the model's weights get no update
        loss = sum(
            torch.nn.functional.cross_entropy(
                logits[:, : length - 1 - j, j - 1].reshape(-1, vocab), sequences[:, j + 1 :].reshape(-1)
            )
            for j in range(1, horizon)
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.zero_grad(set_to_none=True)
    return heads.eval()


@dataclass
class TinyTarget:
    folder: Path  #: the target folder (``--model``)
    model: object  #: the transformers model, as saved
    heads: object  #: its DraftHeads, as saved
    tokenizer: Path  #: model/tokenizer.json
    lm: Path  #: a 3-gram .dlm over the corpus, built through the tokenizer
    corpus: Path  #: the text the tokenizer and the LM were trained on


def tiny_target(folder: Path, horizon: int = 3, seed: int = 0) -> TinyTarget:
    """Writes a target folder into ``folder`` (and ``lm.dlm``, ``corpus.txt`` beside it)."""
    from draftlattice.ngram.build import build_lm
    from draftlattice.tokenizer import train_tokenizer

    folder = Path(folder)
    lines = data_file("wikitext-2/train.txt").read_text(encoding="utf-8").splitlines()
    corpus = folder / "corpus.txt"
    folder.mkdir(parents=True, exist_ok=True)
    corpus.write_text("\n".join(line for line in lines[:CORPUS_LINES] if line.strip()) + "\n", encoding="utf-8")
    model_dir = folder / "model"
    tokenizer = train_tokenizer([corpus], TOKENIZER_VOCAB, model_dir / "tokenizer.json")
    model = llama(tokenizer.get_vocab_size(), seed=seed)
    model.save_pretrained(model_dir)
    heads = distilled_heads(model, horizon, seed=seed)
    heads.save_pretrained(folder / "heads")
    lm = folder / "lm.dlm"
    build_lm(corpus, 3, out_path=lm, tokenizer=model_dir / "tokenizer.json")
    return TinyTarget(folder, model, heads, model_dir / "tokenizer.json", lm, corpus)
