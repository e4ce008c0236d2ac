"""Kernel launches and host synchronisations per decoding step, by way of running the target: the
model's own transformers forward, the dense lean step, and the lean step at fixed shapes
(``GraphedStep``: one CUDA graph replay per forward on a GPU), on the default model's drafted
greedy decoding (``ngram_lookup_tree``), counted by torch.profiler.

On CUDA: CUDA runtime calls that launch work (kernels, graph replays, memcpy/memset) and that wait
for the device (stream/device/event synchronisations), per target call. On the CPU, where nothing
is launched: the PyTorch operators a call dispatches (``aten::`` ops at the top of the stack,
views left out), what a GPU would launch one by one, and how many would be left if each
fixed-shape forward were one graph replay (as on CUDA).

    python bench/step_launches.py [--device cuda] [--dtype bfloat16] [--max-new-tokens 32] [--p 4] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from draftlattice.lean.graphed import GRAPH_REGION

LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch")
COPIES = ("cudaMemcpyAsync", "cudaMemsetAsync", "cudaMemcpy", "cudaMemset")
WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
#: operators that only make views (no kernel on a GPU)
VIEWS = {
    "aten::" + name
    for name in "slice view transpose reshape unsqueeze squeeze select expand chunk split unbind narrow t permute "
    "as_strided alias detach detach_ resolve_conj resolve_neg lift_fresh diagonal _reshape_alias".split()
}


def count(events, cuda: bool) -> dict:
    """Launches and waits (CUDA) or top-level operators (CPU) among the profiled events."""
    names = [e.name for e in events]
    if cuda:
        return {
            "launches": sum(n in LAUNCHES or n in COPIES for n in names),
            "graph_replays": names.count("cudaGraphLaunch"),
            "waits": sum(n in WAITS for n in names),
        }
    top = [e for e in events if e.name.startswith("aten::") and not _under(e, lambda n: n.startswith("aten::"))]
    computing = [e for e in top if e.name not in VIEWS]
    in_graphs = sum(_under(e, lambda n: n == GRAPH_REGION) for e in computing)
    regions = sum(e.name == GRAPH_REGION for e in events)
    # under a CUDA graph, each region's operators become one replay
    return {"operators": len(computing), "operators_left_by_graphs": len(computing) - in_graphs + regions}


def _under(event, test) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if test(parent.name):
            return True
        parent = parent.cpu_parent
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--p", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    import draftlattice.hf as dlhf
    from draftlattice.default_model import load_default
    from draftlattice.lean import GraphedStep, LeanLlama

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    b = load_default(getattr(torch, args.dtype), device)
    ids = torch.tensor([b.chat_ids("What are the benefits of regular exercise?")], device=device)
    dense = LeanLlama(b.model, "dense")
    ways = {
        "transformers forward": None,
        "lean dense": dense,
        "lean dense, graphed": GraphedStep(dense, capacity=ids.shape[1] + args.max_new_tokens + 64),
    }
    drafting = dict(
        custom_generate=dlhf.generate,
        draft_heads=b.heads,
        draft_lm=b.lm,
        draft_p=args.p,
        draft_lookup=3,
        draft_datastore=b.datastore,
        return_dict_in_generate=True,
        do_sample=False,
        max_new_tokens=args.max_new_tokens,
    )
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    rows, reference = [], None
    for name, step in ways.items():
        kwargs = {**drafting, **({} if step is None else {"draft_step": step})}
        with torch.inference_mode():
            b.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)  # warm-up (and graph capture)
            with profile(activities=activities) as prof:
                out = b.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        calls = out.draft_stats.target_calls
        counts = count(prof.events(), cuda)
        reference = out.sequences if reference is None else reference
        row = {
            "way": name,
            "target_calls": calls,
            **{k: v for k, v in counts.items()},
            **{f"{k}_per_call": round(v / calls, 1) for k, v in counts.items()},
            "same_output": bool(torch.equal(out.sequences, reference)),
        }
        rows.append(row)
        print(row, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
