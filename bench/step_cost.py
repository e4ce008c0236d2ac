"""What one target step of the default model costs against the nodes it verifies, per way of
running it, in one run: transformers' eager forward (bf16, fp32; with torchao's CPU
weight-only int4 and int8 layers where torchao is installed), the lean step (dense bf16 and
fp32, int8 and int4 on draftlattice's kernels and on PyTorch's, int4 fused into one C++ call per
step or not; dense bf16 and fp32 through ``torch.compile`` too) and llama.cpp's decode of n tokens (the same Q4_1 GGUF, in a child process;
when llama-cpp-python is installed). Each step appends n tokens after a chat prompt (about 40 tokens) in the cache and
computes the logits of all n; medians of alternated rounds, each timed step right after an
untimed one of the same way (decoding runs steps back to back; the first step after another
way's reads colder caches and wakes threads).

    python bench/step_cost.py [--nodes 1 2 4 8 16 32 64] [--rounds 7] [--threads 2] [--json FILE]

The compiled ways (inductor, CPU) print each node count's compile time (its first call): run
twice with the same ``TORCHINDUCTOR_CACHE_DIR`` for cold and warm (on-disk cache) figures.
"""

from __future__ import annotations

import argparse
import copy
import functools
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


def torchao_models(model) -> dict:
    """The model with torchao's CPU weight-only kernels in its linear layers (the output layer
    stays bf16: torchao's int8 path over it cost more than it saved), one copy per format; none
    without torchao. Its x86 int8 x int4 kernel (``Int8DynamicActivationInt4WeightConfig``,
    ``da8w4_linear_cpu``) is not in torchao's PyPI wheels: it is tried and reported."""
    try:
        from torchao.prototype.quantization.int4.inference_workflow import (
            Int8DynamicActivationInt4WeightConfig,
            PrototypeInt4WeightOnlyConfig,
        )
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
    except ImportError as error:
        print(f"(no torchao rows: {error}; pip install torchao)")
        return {}
    configs = {
        # Q4_1's groups of 32; PyTorch's tinygemm kernel (_weight_int4pack_mm_for_cpu) under it
        "transformers bf16, torchao int4": PrototypeInt4WeightOnlyConfig(group_size=32, set_inductor_config=False),
        "transformers bf16, torchao int8": Int8WeightOnlyConfig(set_inductor_config=False),
        "transformers bf16, torchao int8 x int4": Int8DynamicActivationInt4WeightConfig(group_size=32),
    }
    models = {}
    for name, config in configs.items():
        quantized = copy.deepcopy(model)
        try:
            quantize_(
                quantized, config, filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and "lm_head" not in fqn
            )
        except (AssertionError, RuntimeError, ValueError) as error:
            print(f"(no {name} row: {error})")
            continue
        models[name] = quantized
    return models


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


class SlotCache:
    """A :class:`StaticCache`'s buffers at fixed shapes, for a compiled step: a forward writes its
    keys/values at ``slots [T]`` (a tensor, so their place changes without a recompile) and
    attends to all ``capacity`` slots, the caller's ``[B, 1, T, capacity]`` mask hiding the unused
    ones. A Python int ``length`` would be specialised (a recompile per step)."""

    def __init__(self, cache, slots: torch.Tensor) -> None:
        self.keys, self.values, self.slots = cache.keys, cache.values, slots
        self.length = cache.length  # read only by the lean step's checks

    def reserve(self, new_tokens: int) -> None:
        pass

    def write(self, layer: int, keys: torch.Tensor, values: torch.Tensor):
        self.keys[layer].index_copy_(2, self.slots, keys)
        self.values[layer].index_copy_(2, self.slots, values)
        return self.keys[layer], self.values[layer]

    def advance(self, new_tokens: int) -> None:
        pass


def compiled_forward(lean: LeanLlama):
    """The dense lean step (``hidden`` then ``logits``, the same code) under ``torch.compile``,
    one graph per token count (fixed shapes)."""

    def forward(tokens, positions, mask, cache):
        return lean.logits(lean.hidden(tokens, positions, mask, cache))

    return torch.compile(forward, dynamic=False, fullgraph=True)


def compiled_step(lean: LeanLlama, forward, prompt: torch.Tensor, n: int, compile_s: dict, capacity: int):
    """A compiled lean step of n tokens after the prompt, attending to all ``capacity`` slots; its
    first call (the compile) is timed into ``compile_s[n]``, and its logits are checked against
    the eager step's."""
    cache = lean.new_cache(1, capacity)
    with torch.inference_mode():
        lean.hidden(prompt, torch.arange(prompt.shape[1]).unsqueeze(0), None, cache)
    length = cache.length
    tokens = torch.randint(0, 1000, (1, n), generator=torch.Generator().manual_seed(n))
    positions = torch.arange(length, length + n).unsqueeze(0)
    mask = torch.full((1, 1, n, cache.capacity), torch.finfo(lean.dtype).min, dtype=lean.dtype)
    mask[..., : length + n] = 0
    slots = SlotCache(cache, positions[0].clone())
    start = time.perf_counter()
    logits = forward(tokens, positions, mask, slots)
    compile_s[n] = time.perf_counter() - start
    eager = lean.logits(lean.hidden(tokens, positions, mask[..., : length + n], cache))
    cache.length = length
    _check_close(logits, eager, f"{lean.dtype} step of {n} tokens")
    return lambda: forward(tokens, positions, mask, slots)


def _check_close(compiled: torch.Tensor, eager: torch.Tensor, what: str) -> None:
    """The compiled logits are the eager step's up to rounding; the argmax moves only where the
    eager step's top two are within that rounding (a bf16 near-tie)."""
    error = (compiled - eager).abs().max().item()
    scale = eager.abs().max().item()
    top2 = eager.topk(2, dim=-1).values
    moved = compiled.argmax(-1) != eager.argmax(-1)
    if error > 0.05 * scale or bool((moved & (top2[..., 0] - top2[..., 1] > 2 * error)).any()):
        raise RuntimeError(f"compiled {what}: logits off by {error:.3g} (max {scale:.3g}), argmax moved")
    print(
        f"compiled {what}: logits within {error:.3g} of eager (max |logit| {scale:.3g}), argmax moved in "
        f"{int(moved.sum())} of {moved.numel()} rows (near-ties)"
    )


def check_compiled_greedy(lean: LeanLlama, forward, prompt: torch.Tensor, steps: int = 8) -> None:
    """Greedy one-token steps of the compiled step give the eager step's tokens (``greedy``)."""
    want = lean.greedy(prompt, steps)
    cache = lean.new_cache(1, 512)
    P = prompt.shape[1]
    hidden = lean.hidden(prompt, torch.arange(P).unsqueeze(0), None, cache)
    token = int(lean.logits(hidden[0, -1]).argmax())
    got = [token]
    mask = torch.full((1, 1, 1, cache.capacity), torch.finfo(lean.dtype).min, dtype=lean.dtype)
    mask[..., :P] = 0
    for step in range(steps - 1):
        mask[..., P + step] = 0
        positions = torch.tensor([[P + step]])
        logits = forward(torch.tensor([[token]]), positions, mask, SlotCache(cache, positions[0]))
        token = int(logits[0, -1].argmax())
        got.append(token)
    if got != want:
        raise RuntimeError(f"compiled {lean.dtype} greedy {got} != eager {want}")
    print(f"compiled {lean.dtype} greedy: {steps} tokens as eager's")


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
    parser.add_argument(
        "--compile-capacity", type=int, default=512, help="cache slots a compiled step attends to (fixed shapes)"
    )
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
        for name, quantized in torchao_models(bundle.model).items():
            ways[name] = lambda n, quantized=quantized: transformers_step(quantized, prompt, n)
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
            **(
                {"lean int4, avx2 kernel, unfused": LeanLlama(bundle.model, "int4", kernel="avx2", fused=False)}
                if "avx2" in _core.lowbit_kernels()
                else {}
            ),
            "lean int8, PyTorch's kernel": LeanLlama(bundle.model, "int8", kernel="torch"),
            "lean int4, PyTorch's kernel": LeanLlama(bundle.model, "int4", kernel="torch"),
        }
    for name, lean in steps.items():
        ways[name] = lambda n, lean=lean: lean_step(lean, prompt, n)
    compile_s: dict[str, dict[int, float]] = {}
    torch._dynamo.config.recompile_limit = 64  # a graph per (dtype, node count), one code object
    for name in ("lean bf16", "lean fp32"):
        lean, forward = steps[name], compiled_forward(steps[name])
        own = compile_s.setdefault(f"{name}, torch.compile", {})
        make = functools.partial(compiled_step, lean, forward, prompt, compile_s=own, capacity=args.compile_capacity)
        make.check = functools.partial(check_compiled_greedy, lean, forward, prompt)
        ways[f"{name}, torch.compile"] = make
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
        for make in ways.values():
            getattr(make, "check", lambda: None)()
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
    for name, per in compile_s.items():
        if per:
            print(f"{name}: compile (first call) s: " + ", ".join(f"{n}: {s:.1f}" for n, s in per.items()))
    if args.json:
        with open(args.json, "w") as f:
            record = {"threads": args.threads, "rounds": args.rounds, "ms": result, "compile_s": compile_s}
            json.dump(record, f, indent=2)


if __name__ == "__main__":
    main()
