"""Work of the exact p-best search on fixed lattices: arcs scored by the LM per lattice (the
`_core.rescore_stats` counter), and a loop of `_core.rescore` for callgrind. Load-independent
figures for comparing two builds or two model files on the same lattices.

Lattice sets are saved once (npz) and reused, so that every build sees the same lattices:

    # bench/rescore_latency.py's lattices over wt2_kn4 (needs pynini and the cached automata)
    PYTHONPATH=python:<pynini dir> python bench/search_work.py save-wt2 bench/.cache/work-wt2.npz
    # the engine's own lattices: greedy decoding of 20 WikiText-2 test prompts x 64 tokens with
    # the default model (V = 49,152, h = 4), k = 8, 1-best, alpha = 0.5 (each rescore recorded);
    # `arcs` then needs the LM it was drafted with: lm_models/smollm2/katz4.dlm
    PYTHONPATH=python python bench/search_work.py save-decoder bench/.cache/work-decoder.npz
    # median (and mean) arcs scored per set
    PYTHONPATH=python python bench/search_work.py arcs LM.dlm SETS.npz [--vocab WORDS.txt]
    # C++ time per scored arc (each search timed inside C++ over the arcs it scored), per set
    PYTHONPATH=python python bench/search_work.py arc-cost LM.dlm SETS.npz [--vocab WORDS.txt]
    # instructions: run N lattices of one set under callgrind, minus the same with N = 0
    valgrind --tool=callgrind --toggle-collect='*BestDrafts*' \\
        python bench/search_work.py loop LM.dlm SETS.npz SET N
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

WT2_SHAPES = [(8, 16, (1, 4, 16)), (4, 4, (1,)), (8, 8, (1,)), (16, 16, (1,))]
WT2_KINDS = ("unigram", "plausible")


def save_wt2(out: Path, n: int, seed: int) -> None:
    """The lattices of bench/rescore_latency.py (same seeds per kind and shape)."""
    import _fst_reference as ref
    from draftlattice.assets import data_dir

    data = data_dir()
    maker = ref.LatticeMaker(ref.convert(data / "lm" / "wt2_kn4.arpa.xz"), data / "wikitext-2" / "test.txt")
    arrays = {}
    for kind in WT2_KINDS:
        for h, k, ps in WT2_SHAPES:
            lat = maker.make(kind, n, h, k, seed + 1000 * WT2_KINDS.index(kind) + 37 * h + k)
            name = f"{kind}-{h}x{k}"
            arrays[f"{name}/tokens"] = lat.tokens.astype(np.int32)
            arrays[f"{name}/logprobs"] = lat.logprobs.astype(np.float32)
            arrays[f"{name}/contexts"] = lat.contexts.astype(np.int32)
            arrays[f"{name}/ps"] = np.array(ps)
    arrays["alpha"] = np.array(1.0)
    arrays["bos"] = np.array(False)
    np.savez_compressed(out, **arrays)
    print(f"saved {len(arrays) // 4} sets of {n} lattices to {out}")


def save_decoder(out: Path, prompts: int, tokens: int, k: int, alpha: float) -> None:
    """Every lattice the 1-best lattice drafter rescores while the engine decodes with the default
    model (bfloat16, its shipped heads and 4-gram), with its context."""
    import torch

    from draftlattice.assets import WIKITEXT_TEST, data_file
    from draftlattice.decode import Engine, LatticeDrafter, RowStopper
    from draftlattice.default_model import load_default
    from draftlattice.evaluate.prompts import paragraph_prompts
    from draftlattice.tokenizer import load_tokenizer

    torch.manual_seed(0)
    torch.set_num_threads(1)
    bundle = load_default(torch.bfloat16)
    tok = load_tokenizer(bundle.folder / "tokenizer.json")
    captured = []

    class RecordingDrafter(LatticeDrafter):
        """The 1-best lattice drafter, recording each step's lattice and LM context."""

        def _rescored(self, ids, logprobs, contexts):
            for b, context in enumerate(contexts):
                captured.append((ids[b].astype(np.int32), logprobs[b].astype(np.float32), list(context), False))
            return super()._rescored(ids, logprobs, contexts)

    for prompt in paragraph_prompts(data_file(WIKITEXT_TEST), tok, prompts, 32):
        ids = torch.tensor([prompt])
        engine = Engine(bundle.model, bundle.heads, RecordingDrafter(bundle.lm, k=k, p=1, alpha=alpha), layout="batch")
        engine.run(ids, RowStopper(ids, tokens, set(), [], 0), max_length=len(prompt) + tokens)
    shapes = [t.shape for t, _, _, _ in captured]
    h, kk = max(set(shapes), key=shapes.count)  # the last steps of a sequence may have fewer heads
    kept = [c for c, shape in zip(captured, shapes) if shape == (h, kk)]
    width = max(1, max(len(c) for _, _, c, _ in kept))
    contexts = np.full((len(kept), width), -1, np.int32)
    for i, (_, _, c, _) in enumerate(kept):
        contexts[i, : len(c)] = c
    np.savez_compressed(
        out,
        **{
            f"decoder-{h}x{kk}/tokens": np.stack([t for t, _, _, _ in kept]).astype(np.int32),
            f"decoder-{h}x{kk}/logprobs": np.stack([lp for _, lp, _, _ in kept]).astype(np.float32),
            f"decoder-{h}x{kk}/contexts": contexts,
            f"decoder-{h}x{kk}/bos": np.array([b for _, _, _, b in kept]),
            f"decoder-{h}x{kk}/ps": np.array([1]),
            "alpha": np.array(alpha),
            "bos": np.array(False),
        },
    )
    print(f"saved {len(kept)} of {len(captured)} decoder lattices (those of shape {h}x{kk}) to {out}")


def load_sets(path: Path):
    """{set name: (lattices, contexts, bos flags, ps)} and alpha."""
    from draftlattice import _core

    data = np.load(path)
    names = sorted({key.split("/")[0] for key in data.files if "/" in key})
    sets = {}
    for name in names:
        tokens, logprobs, contexts = (data[f"{name}/{part}"] for part in ("tokens", "logprobs", "contexts"))
        n = len(tokens)
        bos = data[f"{name}/bos"] if f"{name}/bos" in data.files else np.full(n, bool(data["bos"]))
        lattices = [_core.Lattice.from_topk(tokens[i], logprobs[i]) for i in range(n)]
        ctx = [np.asarray([t for t in contexts[i] if t >= 0], np.int32) for i in range(n)]
        sets[name] = (lattices, ctx, [bool(b) for b in bos], [int(p) for p in data[f"{name}/ps"]])
    return sets, float(data["alpha"])


def load_lm(path: str, vocab: Path | None):
    from draftlattice import NgramLM

    if vocab is None:
        return NgramLM(path)
    return NgramLM(path, vocab=vocab.read_text(encoding="utf-8").split("\n")[:-1])


def arcs(args) -> None:
    from draftlattice import _core

    lm = load_lm(args.lm, args.vocab)
    sets, alpha = load_sets(args.sets)
    print(f"{'set':<22} {'p':>3} {'n':>4} | {'median arcs':>11} {'mean arcs':>10} {'median nodes':>12}")
    for name, (lattices, contexts, bos, ps) in sets.items():
        for p in ps:
            stats = [_core.rescore_stats(lat, lm, p, alpha, c, b) for lat, c, b in zip(lattices, contexts, bos)]
            a = [s[1] for s in stats]
            print(
                f"{name:<22} {p:>3} {len(a):>4} | {statistics.median(a):>11.1f} {statistics.mean(a):>10.1f}"
                f" {statistics.median(s[0] for s in stats):>12.1f}"
            )


def arc_cost(args) -> None:
    """C++ time per scored arc: each lattice's search timed inside C++ (`_core.rescore_seconds`,
    median of `repeats`) over the arcs it scored (`rescore_stats`); the median over the set."""
    from draftlattice import _core

    lm = load_lm(args.lm, args.vocab)
    sets, alpha = load_sets(args.sets)
    print(f"{'set':<22} {'p':>3} {'n':>4} | {'median arcs':>11} {'median us':>10} {'ns per arc':>10}")
    for name, (lattices, contexts, bos, ps) in sets.items():
        for p in ps:
            arcs, seconds, per_arc = [], [], []
            for lat, c, b in zip(lattices, contexts, bos):
                n = _core.rescore_stats(lat, lm, p, alpha, c, b)[1]
                t = _core.rescore_seconds(lat, lm, p, alpha, c, b, args.repeats)
                arcs.append(n)
                seconds.append(t)
                per_arc.append(t / max(n, 1))
            print(
                f"{name:<22} {p:>3} {len(arcs):>4} | {statistics.median(arcs):>11.1f}"
                f" {statistics.median(seconds) * 1e6:>10.1f} {statistics.median(per_arc) * 1e9:>10.1f}"
            )


def loop(args) -> None:
    from draftlattice import _core

    lm = load_lm(args.lm, args.vocab)
    sets, alpha = load_sets(args.sets)
    lattices, contexts, bos, ps = sets[args.set]
    p = args.p or ps[0]
    for i in range(args.n):
        _core.rescore(lattices[i], lm, p, alpha, contexts[i], bos[i])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("save-wt2")
    s.add_argument("out", type=Path)
    s.add_argument("-n", type=int, default=100)
    s.add_argument("--seed", type=int, default=2024)
    s = sub.add_parser("save-decoder")
    s.add_argument("out", type=Path)
    s.add_argument("--prompts", type=int, default=20)
    s.add_argument("--tokens", type=int, default=64)
    s.add_argument("-k", type=int, default=8)
    s.add_argument("--alpha", type=float, default=0.5)
    for name in ("arcs", "arc-cost", "loop"):
        s = sub.add_parser(name)
        s.add_argument("lm")
        s.add_argument("sets", type=Path)
        s.add_argument("--vocab", type=Path, help="token i = line i (wt2 sets: bench/.cache/fst-wt2_kn4/words.txt)")
        if name == "arc-cost":
            s.add_argument("--repeats", type=int, default=5, help="timed searches per lattice (median)")
        if name == "loop":
            s.add_argument("set")
            s.add_argument("n", type=int)
            s.add_argument("-p", type=int, default=None)
    args = ap.parse_args()
    if args.command == "save-wt2":
        save_wt2(args.out, args.n, args.seed)
    elif args.command == "save-decoder":
        save_decoder(args.out, args.prompts, args.tokens, args.k, args.alpha)
    elif args.command == "arcs":
        arcs(args)
    elif args.command == "arc-cost":
        arc_cost(args)
    else:
        loop(args)


if __name__ == "__main__":
    main()
