"""What one target step of the default model costs against the nodes it verifies, per way of
running it, in one run: transformers' eager forward (bf16, fp32), the lean step (dense bf16 and
fp32, int8 and int4 on draftlattice's kernels and on PyTorch's, int4 fused into one C++ call per
step or not) and llama.cpp's decode of n tokens (the same Q4_1 GGUF, in a child process;
when llama-cpp-python is installed). Each step appends n tokens after a chat prompt (about 40 tokens) in the cache and
computes the logits of all n; medians of alternated rounds, each timed step right after an
untimed one of the same way (decoding runs steps back to back; the first step after another
way's reads colder caches and wakes threads).

    python bench/step_cost.py [--nodes 1 2 4 8 16 32 64] [--rounds 7] [--threads 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from draftlattice import _core
from draftlattice.default_model import load_default
from draftlattice.lean import LeanLlama


def transformers_step(model, prompt: torch.Tensor, n: int):
    with torch.inference_mode():
        cache = model(prompt, use_cache=True).past_key_values
    length = cache.get_seq_length()
    tokens = torch.randint(0, 1000, (1, n), generator=torch.Generator().manual_seed(n))

    def step():
        if cache.get_seq_length() > length:
            cache.crop(length - cache.get_seq_length())  # negative: drop the last step's tokens
        model(tokens, cache=cache, use_cache=True)

    return step


def lean_step(lean: LeanLlama, prompt: torch.Tensor, n: int):
    cache = lean.new_cache(1, 512)
    with torch.inference_mode():
        lean.hidden(prompt, torch.arange(prompt.shape[1]).unsqueeze(0), None, cache)
    length = cache.length
    tokens = torch.randint(0, 1000, (1, n), generator=torch.Generator().manual_seed(n))
    positions = torch.arange(length, length + n).unsqueeze(0)
    mask = torch.zeros(1, 1, n, length + n, dtype=lean.dtype)

    def step():
        cache.length = length
        with lean.session():  # as the engine runs it: PyTorch on one thread around our kernels
            lean.logits(lean.hidden(tokens, positions, mask, cache))

    return step


def llama_step(llm, prompt: list[int], n: int):
    """One decode of n tokens after the prompt, in llama.cpp's child process (its own timing)."""
    tokens = list(range(1000, 1000 + n))
    return lambda: llm.decode_ms(prompt, tokens, 1)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ways", nargs="+", default=None, help="subset of the ways to run (default: all)")
    parser.add_argument("--json", type=str)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_default()
    prompt = torch.tensor([bundle.chat_ids("Why is the sky blue? Explain it to a child in a few sentences.")])
    ways = {}
    model32 = load_default(torch.float32).model
    with torch.inference_mode():
        ways["transformers bf16"] = lambda n: transformers_step(bundle.model, prompt, n)
        ways["transformers fp32"] = lambda n: transformers_step(model32, prompt, n)
        steps = {
            "lean bf16": LeanLlama(bundle.model, "dense"),
            "lean fp32": LeanLlama(model32, "dense"),
            "lean int8": LeanLlama(bundle.model, "int8"),
            "lean int4": LeanLlama(bundle.model, "int4"),
            "lean int4, unfused": LeanLlama(bundle.model, "int4", fused=False),
            # each of our other kernels this CPU runs (avx2: what an AVX2-only CPU gets)
            **{
                f"lean int4, {kernel} kernel": LeanLlama(bundle.model, "int4", kernel=kernel)
                for kernel in _core.lowbit_kernels()[1:-1]
            },
            "lean int8, PyTorch's kernel": LeanLlama(bundle.model, "int8", kernel="torch"),
            "lean int4, PyTorch's kernel": LeanLlama(bundle.model, "int4", kernel="torch"),
        }
    for name, lean in steps.items():
        ways[name] = lambda n, lean=lean: lean_step(lean, prompt, n)
    try:
        from draftlattice.apps.llama_row import LlamaCpp
        from draftlattice.default_model.gguf import default_gguf

        llm = LlamaCpp(default_gguf(), args.threads)
        ways["llama.cpp Q4_1"] = lambda n: llama_step(llm, prompt[0].tolist(), n)
    except ValueError as error:
        print(f"(no llama.cpp row: {error})")
    if args.ways:
        ways = {k: v for k, v in ways.items() if k in args.ways}
    times = {name: {n: [] for n in args.nodes} for name in ways}
    with torch.inference_mode():
        calls = {(name, n): make(n) for name, make in ways.items() for n in args.nodes}
        for call in calls.values():
            call()  # warm-up
        for _ in range(args.rounds):  # alternated: a slow phase of the machine hits every way alike
            for (name, n), call in calls.items():
                call()  # untimed: decoding runs steps back to back, after the same way's step
                start = time.perf_counter()
                own = call()  # llama.cpp's child times its decode itself (no pipe in the figure)
                times[name][n].append(own if isinstance(own, float) else 1e3 * (time.perf_counter() - start))
    result = {name: {n: statistics.median(t) for n, t in per.items()} for name, per in times.items()}
    print(
        f"ms per step (median of {args.rounds}), {args.threads} threads, {platform.processor() or platform.machine()}"
    )
    print("| way | " + " | ".join(f"{n} node{'s' * (n > 1)}" for n in args.nodes) + " | 16 / 1 |")
    print("|---|" + "---:|" * (len(args.nodes) + 1))
    for name, per in result.items():
        ratio = f"{per[16] / per[1]:.2f}x" if 16 in per and 1 in per else "-"
        print(f"| {name} | " + " | ".join(f"{per[n]:.1f}" for n in args.nodes) + f" | {ratio} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "rounds": args.rounds, "ms": result}, f, indent=2)


if __name__ == "__main__":
    main()
