"""The demo's ``llama_cpp`` row: what a CPU user runs today, plain llama.cpp decoding of the same
Q4_1 GGUF the default model is made from (llama-cpp-python, the ``llama`` extra).

Same prompts (token ids, no re-tokenisation), same number of CPU threads, greedy (argmax of each
step's logits) or, in the demo's sampling mode, llama.cpp's own sampler chain at the same
temperature and top-p; stopping at EOS or ``max_new_tokens`` like ``generate()``; timed like the
other rows, the prompt's evaluation included. llama.cpp cannot profit from drafts on these CPUs (n
tokens in one decode cost about n/2 to n times one; bench/RESULTS.md), so it is a plain row.

llama.cpp runs in a child process: its thread pool and torch's OpenMP threads both spin-wait
between parallel regions, and in one process on two cores each slowed the other several-fold.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from pathlib import Path

import torch

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

    def sample(self, ids: list[int], max_new_tokens: int, temperature: float, top_p: float, seed: int) -> list[int]:
        """Sampling of ``ids`` by llama.cpp's own sampler chain (temperature, then top-p below 1,
        then a draw seeded with ``seed``): generate()'s law over llama.cpp's logits."""
        if len(ids) + max_new_tokens > CONTEXT:
            raise ValueError(f"llama_cpp: {len(ids)} + {max_new_tokens} tokens exceed its {CONTEXT} slots")
        self._pipe.send(("sample", list(ids), max_new_tokens, float(temperature), float(top_p), int(seed)))
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


def llama_cpp_row(gguf: Path, threads: int, temperature: float | None = None, top_p: float = 1.0) -> RowSpec:
    """The ``llama_cpp`` row over ``gguf`` with ``threads`` CPU threads: greedy, or with a
    ``temperature`` sampling (each prompt's llama.cpp seed drawn from torch's generator, which
    the demo seeds per prompt)."""
    llm = LlamaCpp(gguf, threads)

    def run(ids: list[int], max_new_tokens: int) -> tuple[list[int], int]:
        if temperature is None:
            tokens = llm.greedy(ids, max_new_tokens)
        else:
            seed = int(torch.randint(0, 2**31 - 1, ()))
            tokens = llm.sample(ids, max_new_tokens, temperature, top_p, seed)
        return tokens, len(tokens)

    mode = "greedy" if temperature is None else "sampling (its own sampler)"
    return RowSpec("llama_cpp", f"llama.cpp {mode}, {gguf.name}, {threads} threads", "-", {}, runner=run)


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
            elif request[0] == "sample":
                _, ids, max_new, temperature, top_p, seed = request
                pipe.send(("value", _sample(llm, ids, max_new, temperature, top_p, seed, eos)))
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


def _sample(
    llm, ids, max_new: int, temperature: float, top_p: float, seed: int, eos: int
) -> list[int]:  # pragma: no cover
    """llama.cpp's sampler chain in generate()'s order: temperature, top-p, the seeded draw."""
    import llama_cpp as lc

    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    try:
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_temp(temperature))
        if top_p < 1.0:
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_p(top_p, 1))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_dist(seed))
        llm.reset()
        llm.eval(ids)
        out: list[int] = []
        while True:
            token = int(lc.llama_sampler_sample(chain, llm.ctx, -1))
            out.append(token)
            if token == eos or len(out) == max_new:
                return out
            llm.eval([token])
    finally:
        lc.llama_sampler_free(chain)
