"""The demo's ``llama_cpp`` row: what a CPU user runs today, plain llama.cpp greedy decoding of
the same Q4_1 GGUF the default model is made from (llama-cpp-python, the ``llama`` extra).

Same prompts (token ids, no re-tokenisation), same number of CPU threads, greedy (argmax of each
step's logits), stopping at EOS or ``max_new_tokens`` like ``generate()``; timed like the other
rows, the prompt's evaluation included. llama.cpp cannot profit from drafts on these CPUs (n
tokens in one decode cost about n/2 to n times one; bench/RESULTS.md), so it is a plain row.

llama.cpp runs in a child process: its thread pool and torch's OpenMP threads both spin-wait
between parallel regions, and in one process on two cores each slowed the other several-fold.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from pathlib import Path

from .demo import RowSpec

logger = logging.getLogger(__name__)

CONTEXT = 2048  #: llama.cpp context slots: the demo's prompts and answers fit with room to spare


class LlamaCpp:
    """llama.cpp over ``gguf`` with ``threads`` threads, in a child process (see the module)."""

    def __init__(self, gguf: Path, threads: int) -> None:
        from importlib.util import find_spec

        if find_spec("llama_cpp") is None:
            raise ValueError("the llama_cpp row needs llama-cpp-python: tools/install_llama_cpp.sh (docs/DECODING.md)")
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, str(gguf), threads), daemon=True)
        self._process.start()
        status = self._receive()
        if status != "ready":
            raise ValueError(f"llama.cpp could not load {gguf}: {status}")
        logger.info("llama.cpp: %s, %d threads (child process %d)", gguf.name, threads, self._process.pid)

    def greedy(self, ids: list[int], max_new_tokens: int) -> list[int]:
        """Greedy decoding of ``ids``: up to ``max_new_tokens`` tokens, EOS included."""
        if len(ids) + max_new_tokens > CONTEXT:
            raise ValueError(f"llama_cpp: {len(ids)} + {max_new_tokens} tokens exceed its {CONTEXT} slots")
        self._pipe.send(("greedy", list(ids), max_new_tokens))
        return self._receive()

    def decode_ms(self, prompt: list[int], tokens: list[int], repeats: int) -> list[float]:
        """Milliseconds of one ``llama_decode`` appending ``tokens`` after ``prompt``, ``repeats`` times."""
        self._pipe.send(("decode", list(prompt), list(tokens), repeats))
        return self._receive()

    def close(self) -> None:
        if self._process.is_alive():
            self._pipe.send(("stop",))
            self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()

    def _receive(self):
        if not self._pipe.poll(600):
            raise RuntimeError("llama.cpp's child process did not answer in 10 minutes")
        kind, value = self._pipe.recv()
        if kind == "error":
            raise RuntimeError(f"llama.cpp failed: {value}")
        return value


def llama_cpp_row(gguf: Path, threads: int) -> RowSpec:
    """The ``llama_cpp`` row over ``gguf`` with ``threads`` CPU threads."""
    llm = LlamaCpp(gguf, threads)

    def run(ids: list[int], max_new_tokens: int) -> tuple[list[int], int]:
        tokens = llm.greedy(ids, max_new_tokens)
        return tokens, len(tokens)

    return RowSpec("llama_cpp", f"llama.cpp greedy, {gguf.name}, {threads} threads", "-", {}, runner=run)


def _serve(pipe, gguf: str, threads: int) -> None:  # pragma: no cover - runs in the child
    try:
        import numpy as np
        from llama_cpp import Llama, llama_get_logits_ith

        llm = Llama(
            model_path=gguf, n_ctx=CONTEXT, n_threads=threads, n_threads_batch=threads, verbose=False, flash_attn=True
        )
        eos, vocab = llm.token_eos(), llm.n_vocab()
    except Exception as error:  # noqa: BLE001 - reported to the parent as one line
        pipe.send(("value", f"{type(error).__name__}: {error}"))
        return
    pipe.send(("value", "ready"))

    def last_logits():
        # llama-cpp-python keeps no logits without logits_all: read the context's last row
        return np.ctypeslib.as_array(llama_get_logits_ith(llm.ctx, -1), shape=(vocab,))

    while True:
        try:
            request = pipe.recv()
        except EOFError:  # the parent is gone
            return
        try:
            if request[0] == "stop":
                return
            if request[0] == "greedy":
                _, ids, max_new = request
                llm.reset()
                llm.eval(ids)
                out: list[int] = []
                while True:
                    token = int(np.argmax(last_logits()))
                    out.append(token)
                    if token == eos or len(out) == max_new:
                        break
                    llm.eval([token])
                pipe.send(("value", out))
            elif request[0] == "decode":
                _, prompt, tokens, repeats = request
                llm.reset()
                llm.eval(prompt)
                times = []
                for _ in range(repeats):
                    llm.n_tokens = len(prompt)  # eval() drops the slots from n_tokens on first
                    start = time.perf_counter()
                    llm.eval(tokens)
                    times.append(1e3 * (time.perf_counter() - start))
                pipe.send(("value", times))
        except Exception as error:  # noqa: BLE001
            pipe.send(("error", f"{type(error).__name__}: {error}"))
