"""The demo's ``llama_cpp`` row: what a CPU user runs today, plain llama.cpp greedy decoding of
the same Q4_1 GGUF the default model is made from (llama-cpp-python, the ``llama`` extra).

Same prompts (token ids, no re-tokenisation), same number of CPU threads, greedy (argmax of each
step's logits), stopping at EOS or ``max_new_tokens`` like ``generate()``; timed like the other
rows, the prompt's evaluation included. llama.cpp cannot profit from drafts on these CPUs (n
tokens in one decode cost about n/2 to n times one; bench/RESULTS.md), so it is a plain row.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from .demo import RowSpec

logger = logging.getLogger(__name__)

CONTEXT = 2048  #: llama.cpp context slots: the demo's prompts and answers fit with room to spare


def llama_cpp_row(gguf: Path, threads: int) -> RowSpec:
    """The ``llama_cpp`` row over ``gguf`` with ``threads`` CPU threads."""
    try:
        from llama_cpp import Llama
    except ImportError:
        raise ValueError(
            "the llama_cpp row needs llama-cpp-python: tools/install_llama_cpp.sh (see docs/DECODING.md)"
        ) from None
    llm = Llama(
        model_path=str(gguf),
        n_ctx=CONTEXT,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
        flash_attn=True,
    )
    eos = llm.token_eos()

    def run(ids: list[int], max_new_tokens: int) -> tuple[list[int], int]:
        if len(ids) + max_new_tokens > CONTEXT:
            raise ValueError(f"llama_cpp row: {len(ids)} + {max_new_tokens} tokens exceed its {CONTEXT} slots")
        llm.reset()
        llm.eval(ids)
        out: list[int] = []
        while True:
            token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            out.append(token)
            if token == eos or len(out) == max_new_tokens:
                return out, len(out)
            llm.eval([token])

    logger.info("llama_cpp row: %s, %d threads", gguf.name, threads)
    return RowSpec("llama_cpp", f"llama.cpp greedy, {gguf.name}, {threads} threads", "-", {}, runner=run)
