"""The full evaluation pipeline on the tests' toy model (sparse Markov chain, h = 4, trained for
seconds) with a 3-gram Katz LM of the same chain: a sanity check that rescoring helps when the LM
knows the text, until the shipped model exists.

    PYTHONPATH=python:tests python bench/eval_toy.py
"""

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _decode_models import markov_corpus, prompts, trained_model  # noqa: E402
from draftlattice import NgramLM  # noqa: E402
from draftlattice.evaluate.record import record_trace  # noqa: E402
from draftlattice.evaluate.report import evaluate_trace, format_tables  # noqa: E402
from draftlattice.ngram.build import build_lm  # noqa: E402

torch.set_num_threads(1)
model = trained_model(4)
trace = record_trace(model, prompts(40, 0), 60, top_k=8, progress=False)
with tempfile.TemporaryDirectory() as tmp:
    corpus = markov_corpus(20000, 0).tolist()
    text = Path(tmp) / "chain.txt"
    text.write_text("\n".join(" ".join(map(str, corpus[i : i + 30])) for i in range(0, len(corpus), 30)) + "\n")
    build_lm(text, 3, out_path=Path(tmp) / "chain.arpa")
    lm = NgramLM(Path(tmp) / "chain.arpa")
    print(
        format_tables(
            evaluate_trace(
                trace, lm, k=8, p=8, tune_alpha=True, ks=(1, 2, 4, 8), ps=(1, 2, 4, 8), alphas=(0, 0.25, 0.5, 1, 2)
            )
        ),
        end="",
    )
