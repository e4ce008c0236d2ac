"""`draftlattice demo`: the default model (SmolLM2-135M-Instruct) with its shipped heads and
n-gram LM, compared with plain generate() and prompt lookup on chat and text prompts.

The model is fetched into the user cache on first use (``draftlattice model fetch``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from ..default_model.fastest import BUDGET_TABLE, retrieval_label, table_settings
from ..pairing import ALLOW_MISMATCH_HELP
from ._demo_checks import check_arguments, check_context, heads_vocab_size, wikitext
from ._fetch_line import progress_line as _progress_line
from ._output import FORCE_HELP, atomic_file, check_output

DEFAULT_P = 4  #: the sampling rows' drafts a step (and with --p alone, the tree rows' p best)
#: the tree rows' best prefixes when nothing is fitted (bench/RESULTS.md, "Trees of the best prefixes")
DEFAULT_NODES = 8


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="the default model: generate() vs prompt lookup vs heads vs n-gram rescored drafts",
        description="Decode chat questions and WikiText-2 raw test openings with the default model "
        "(fetched on first use) once per row: generate, prompt_lookup, lean (plain decoding on the lean step), "
        "llama_cpp (with llama-cpp-python), lookup (a context copy, else the datastore's retrieved draft, no "
        "heads), heads, heads_tree, ngram, ngram_tree, ngram_lookup_tree (with --temperature: generate, lean, "
        "llama_cpp, lookup, heads, heads_multi, ngram_multi, ngram_tree, ngram_lookup_tree; the drafted ones "
        "lossless). "
        "Prints block efficiency (tokens per serial target call), tokens/s, speedup over generate(), llama.cpp "
        "and the lean step's plain decoding, and how many outputs equal their reference's.",
    )
    p.add_argument("--quick", action="store_true", help="2 prompts x 16 tokens (CI smoke run)")
    p.add_argument("--chat", type=int, default=4, help="chat questions (default 4)")
    p.add_argument(
        "--text",
        type=int,
        default=4,
        help="WikiText-2 raw test openings (default 4; 0: chat questions only, no data needed)",
    )
    p.add_argument("--max-new-tokens", type=int, default=64, help="tokens generated per prompt (default 64)")
    p.add_argument("--horizon", type=int, default=4, help="h: drafts of h - 1 tokens from heads 2..h (default 4)")
    p.add_argument("--k", type=int, default=8, help="lattice candidates per head (default 8)")
    p.add_argument(
        "--p",
        type=int,
        help="the tree rows verify the lattice's p best drafts (default: the tree of its best prefixes, "
        "--nodes); the sampling rows draw p drafts (default 4)",
    )
    p.add_argument(
        "--nodes",
        type=int,
        help="the tree rows verify the lattice's NODES best prefixes (default: the tree fitted to this "
        "machine with the weight format, p best drafts or best prefixes: the highest predicted tokens/s "
        "from the lean step's cost against nodes, measured once per CPU and cached, and the drafter's "
        "measured gains; 8 prefixes with --step transformers)",
    )
    p.add_argument("--alpha", type=float, default=0.5, help="n-gram LM weight (default 0.5)")
    p.add_argument(
        "--lookup",
        type=int,
        default=3,
        help="lookup and ngram_lookup_tree: longest context n-gram the copied draft matches (default 3)",
    )
    p.add_argument(
        "--lookup-tokens",
        type=int,
        help="lookup and ngram_lookup_tree: longest copied draft (default: with --p's fit, the lookup row's "
        "fitted to this machine and ngram_lookup_tree's the draft budget table's; else the library's, 6)",
    )
    p.add_argument(
        "--retrieval",
        type=int,
        help="lookup row: also verify the datastore's draft of up to this many tokens beside a context copy "
        "(0: only where the context has none; default: fitted to this machine with the copy's length)",
    )
    p.add_argument(
        "--dtype",
        choices=["bfloat16", "float32"],
        default="bfloat16",
        help="model dtype; float32 makes every drafted row equal generate() (default bfloat16)",
    )
    p.add_argument("--temperature", type=float, help="lossless sampling at this temperature instead of greedy")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus of the sampling mode (default 1: off)")
    p.add_argument(
        "--sample-alpha",
        type=float,
        default=0.2,  # DemoSettings.sample_alpha (apps/demo.py imports torch; the CLI loads it on use)
        help="LM weight of sampled lattice drafts (default %(default)s: tuned on held-out prompts)",
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed (prompt i uses seed + i)")
    p.add_argument("--lm", type=Path, help="n-gram LM over the model's tokens (default: the shipped one)")
    p.add_argument("--model-dir", type=Path, help="transformers folder of the model (default: fetched)")
    p.add_argument("--models", type=Path, help="shipped-models directory (default: lm_models/)")
    p.add_argument("--data", type=Path, help="WikiText-2 raw test.txt (default: in the shared data directory)")
    p.add_argument(
        "--weights",
        choices=["dense", "int8", "int4"],
        help="weight format of the lean target step that runs the drafted rows: dense (the model's "
        "dtype), int8 or int4 (CPU; the GGUF's own Q8_0 and Q4_1 schemes on draftlattice's kernels, "
        "activations in bfloat16, or in int8 per group of 32 on the integer kernels as llama.cpp's; int4 runs "
        "fused, all layers in one C++ call). Default: int4 or "
        "dense, whichever the fit predicts faster on this CPU (with --p); dense with --dtype float32",
    )
    p.add_argument(
        "--kernel",
        default="auto",
        help="kernel of the quantized weights: auto (default: the fastest this CPU runs), torch "
        "(PyTorch's) or one of draftlattice's: avx512-vnni, amx-int8 (AMX tiles: the VNNI kernel's bits; auto takes the faster of the two here), avx512-bf16, "
        "avx2-int8, avx2, portable (those this CPU runs)",
    )
    p.add_argument(
        "--step",
        choices=["lean", "transformers"],
        default="lean",
        help="what runs the drafted rows' target forward: the lean step (default) or transformers' own",
    )
    p.add_argument(
        "--no-llama-cpp",
        action="store_true",
        help="leave out the llama_cpp row (plain llama.cpp greedy decoding of the same Q4_1 GGUF; "
        "shown when llama-cpp-python is installed)",
    )
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--allow-mismatch", action="store_true", help=ALLOW_MISMATCH_HELP)
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the rows and texts as JSON")
    p.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    p.add_argument("--force", action="store_true", help=FORCE_HELP + " (the --json / --html files)")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        raise ValueError("draftlattice demo needs PyTorch: pip install torch==2.13.0 (see README)") from None
    from ..apps.demo import DemoSettings, check_candidates, run_demo
    from ..apps.demo_prompts import demo_prompts
    from ..apps.demo_report import DemoReport
    from ..default_model import FetchError, load_default
    from ..filekinds import expect_lm, expect_text

    if args.quick:
        args.chat, args.text, args.max_new_tokens = 1, 1, 16
    data = wikitext(args)
    check_arguments(args, data)
    if data is not None:
        expect_text(data)
    if args.lm is not None:
        expect_lm(args.lm)
    for out in (args.json, args.html):
        if out is not None:
            check_output(out, force=args.force, inputs=[args.lm, data], expect="file")
    if args.json is not None and args.html is not None and Path(args.json).resolve() == Path(args.html).resolve():
        raise ValueError(f"--json and --html are the same file ({args.json}): give two")
    settings = DemoSettings(
        max_new_tokens=args.max_new_tokens,
        k=args.k,
        p=args.p if args.p is not None else DEFAULT_P,
        nodes=args.nodes if args.nodes is not None or args.p is not None else DEFAULT_NODES,
        alpha=args.alpha,
        temperature=args.temperature,
        top_p=args.top_p,
        sample_alpha=args.sample_alpha,
        lookup=args.lookup,
        seed=args.seed,
        **({} if args.lookup_tokens is None else {"lookup_tokens": args.lookup_tokens}),
        **({} if args.retrieval is None else {"retrieval": args.retrieval}),
    )
    check_candidates(args.k, settings.p, heads_vocab_size(args.models))  # before the model loads
    formats = _formats(args)
    llama_row = _llama_row_available(args)
    torch.set_num_threads(args.threads)
    try:  # load_default checks horizon, folders and LM before it fetches
        with _progress_line() as line:
            bundle = load_default(
                getattr(torch, args.dtype),
                horizon=args.horizon,
                model_dir=args.model_dir,
                models=args.models,
                lm=args.lm,
                allow_mismatch=args.allow_mismatch,
                progress=line,
                weights=formats[0] if formats else None,
                kernel=args.kernel,
            )
            extra_rows = [_llama_cpp_row(args, line)] if llama_row else []
    except FetchError as error:
        print(f"draftlattice: error: {error}", file=sys.stderr)
        return 1
    fitted = None
    if bundle.step is not None and ((args.p is None and args.nodes is None) or len(formats) > 1):
        bundle.step, tree, copy, fitted = _fit(
            bundle,
            args.models,
            formats,
            args.p,
            args.nodes,
            args.kernel,
            args.lookup_tokens is None,
            args.retrieval,
            settings.temperature,
        )
        if tree is not None:  # the sampling rows' p drafts stay --p's unless the tree is the p best
            p = settings.p if settings.sampling and tree.node_budget is not None else tree.p
            settings = dataclasses.replace(settings, p=p, nodes=tree.node_budget)
            if args.lookup_tokens is None:  # ngram_lookup_tree's copy: the fitted tree's
                settings = dataclasses.replace(settings, lookup_tokens=tree.tree_copy_tokens)
        if copy is not None:
            settings = dataclasses.replace(settings, copy_tokens=copy.copy_tokens, retrieval=copy.retrieval)
    prompts = demo_prompts(bundle.tokenizer, data, args.chat, args.text)
    check_context(bundle.model.config, prompts, settings.max_new_tokens)
    rows = run_demo(bundle, prompts, settings, progress=_progress(), extra_rows=extra_rows)
    report = DemoReport(
        settings,
        prompts,
        rows,
        lambda ids: bundle.tokenizer.decode(ids, skip_special_tokens=True),
        model=bundle.folder.name,
        lm=str(bundle.lm.path),
        dtype=args.dtype,
    )
    if fitted is not None:
        report.notes.append(fitted)
        report.notes.append(_fastest_line(bundle, args.models, settings.temperature))
    if bundle.step is not None:
        report.notes.append(
            f"drafted rows run the lean step with {bundle.step.weights} weights"
            + ("" if bundle.step.weights == "dense" else f" on the {bundle.step.kernel} kernel")
            + f"; their reference is its own plain {'sampling' if settings.sampling else 'greedy'} row (lean)"
        )
    if not llama_row and not args.no_llama_cpp:
        report.notes.append(
            "no llama_cpp row: install llama-cpp-python (tools/install_llama_cpp.sh, see docs/DECODING.md) to compare"
        )
    print(report.render())
    if args.json is not None:
        with atomic_file(args.json) as tmp:
            tmp.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.html is not None:
        if settings.sampling:
            print("note: --html records greedy decoding steps; with --temperature it shows the rows only")
        _write_html(bundle, report, args.html)
    exact = [r for r in rows if r.name == "lean"] + report.drafted()
    if args.dtype == "float32" and not settings.sampling and not all(r.identical for r in exact):
        print("ERROR: in float32 every drafted output must equal generate()'s", file=sys.stderr)
        return 1
    return 0


def _fit(
    bundle,
    models,
    formats: list[str],
    p: int | None,
    nodes: int | None,
    kernel: str,
    fit_copy: bool,
    retrieval: int | None = None,
    temperature: float | None = None,
) -> tuple[object, object, object, str | None]:
    """The lean step's weight format, the tree rows' tree (a :class:`~draftlattice.lean.fit.DraftOption`:
    p best drafts or a node budget, and the copy beside it; only ``p``'s or ``nodes``' when given) and (``fit_copy``) the
    lookup row's copy option (its longest copy and retrieval branch, only ``retrieval``'s when
    given) fitted to this machine (each candidate format's cost against nodes measured once and
    cached, the drafters' gains measured once per drafter), with a line saying why; without a
    gains table, the first format, no fitted tree (None) and the default copy (None). ``temperature``
    (sampling): the tree and the copy from the table's sampled gains (the tree rule's) at that
    temperature, where it has them."""
    from ..default_model.load import artifacts_dir
    from ..lean import LeanLlama
    from ..lean.fit import (
        best_format_and_option,
        best_option,
        cached_cost_curve,
        load_options,
        predicted_tokens_per_s,
    )

    table = artifacts_dir(models) / BUDGET_TABLE
    if not table.is_file():
        return bundle.step, None, None, None
    gains = _sampled_gains(table, temperature)
    if gains is not None:
        options = [o for o in gains.node_options if p is None and nodes in (None, o.node_budget)]
    else:
        options = [o for o in load_options(table) if nodes is None and (p is None or o.p == p)]
        options += [o for o in load_options(table, "node_options") if p is None and nodes in (None, o.node_budget)]
    if not options:
        return bundle.step, None, None, None
    steps = {bundle.step.weights: bundle.step}
    steps.update({name: LeanLlama(bundle.model, name, kernel=kernel) for name in formats if name not in steps})
    curves = {name: cached_cost_curve(step) for name, step in steps.items()}
    name, best, predicted = best_format_and_option(curves, options)
    if best.tree_copy_tokens is None:  # a table from before its tree options named their copy
        best = dataclasses.replace(best, tree_copy_tokens=table_settings(table)["copy_tokens"])
    others = "; ".join(
        f"{n} " + ", ".join(f"{o.tree} {predicted_tokens_per_s(c, o):.0f}" for o in options) for n, c in curves.items()
    )
    costs = ", ".join(f"{n}: {ms:.0f}" for n, ms in zip(curves[name].nodes, curves[name].ms) if n in (1, 4, 8, 16, 32))
    copies = (load_options(table, "copy_options") if gains is None else gains.copy_options) if fit_copy else []
    copies = [o for o in copies if retrieval is None or o.retrieval == retrieval]
    copy = best_option(curves[name], copies) if copies else None
    copy_line = (
        ""
        if copy is None
        else f"; lookup row: copies of <= {copy.copy_tokens} tokens{retrieval_label(copy.retrieval)} (predicted "
        f"{predicted_tokens_per_s(curves[name], copy):.0f} tokens/s; by length: "
        + ", ".join(
            f"{o.copy_tokens}{retrieval_label(o.retrieval)} {predicted_tokens_per_s(curves[name], o):.0f}"
            for o in copies
        )
        + ")"
    )
    return (
        steps[name],
        best,
        copy,
        (
            f"{name} weights, tree {best.tree} fitted to this CPU"
            + ("" if gains is None else f" from {gains.describe()}")
            + f" (predicted {predicted:.0f} tokens/s, plain "
            f"decoding {1e3 / curves[name](1):.0f} without the host's time; by format and tree: "
            f"{others}{copy_line}; {name} step ms by nodes {costs}; {table.name}: predictions rank the options "
            "(held-out prompts, prompts' forwards left out), the rows above measure them; "
            "--weights / --p / --nodes / --lookup-tokens / --retrieval to override)"
        ),
    )


def _sampled_gains(table, temperature: float | None):
    """The table's sampled gains at ``temperature`` (None: greedy, or a table without them)."""
    from ..lean.sampled_gains import gains_at

    if temperature is None or "sampled" not in json.loads(table.read_text()):
        return None
    return gains_at(table, temperature)


def _fastest_line(bundle, models, temperature: float | None) -> str:
    """Which drafting of the demo's rows (greedy, or sampled at ``temperature``) the fit predicts
    fastest on this machine, and how to get it."""
    from ..default_model.fastest import fastest_drafting
    from ..default_model.load import artifacts_dir

    sampling = temperature is not None
    try:
        choice = fastest_drafting(
            bundle, artifacts_dir(models) / BUDGET_TABLE, sampling=sampling, temperature=temperature or 1.0
        )
    except ValueError as error:
        return f"fastest {'sampling' if sampling else 'drafting'} not fitted: {error}"
    call = f"fastest_drafting(b, sampling=True, temperature={temperature:g})" if sampling else "fastest_drafting(b)"
    return (
        choice.describe()
        + f"; draftlattice.default_model.fastest.{call}.generate_kwargs(b) gives its generate() arguments"
    )


def _formats(args: argparse.Namespace) -> list[str]:
    """The lean step's candidate weight formats, the first loaded first (none: transformers'
    forward runs the drafted rows)."""
    if args.kernel != "auto" and (args.step == "transformers" or args.weights == "dense" or args.dtype == "float32"):
        raise ValueError(
            "--kernel runs the lean step's quantized weights: it needs --step lean and int8 or int4 weights"
        )
    if args.step == "transformers":
        if args.weights is not None:
            raise ValueError("--weights sets the lean step's format: it needs --step lean")
        return []
    if args.weights is None:
        return ["dense"] if args.dtype == "float32" else ["int4", "dense"]
    if args.weights != "dense" and args.dtype == "float32":
        raise ValueError(f"--weights {args.weights} computes in bfloat16: use --weights dense with --dtype float32")
    return [args.weights]


def _llama_row_available(args: argparse.Namespace) -> bool:
    """Whether the llama_cpp row runs: llama-cpp-python installed, the default model."""
    if args.no_llama_cpp or args.model_dir is not None:
        return False
    from importlib.util import find_spec

    return find_spec("llama_cpp") is not None


def _llama_cpp_row(args: argparse.Namespace, progress):
    from ..apps.llama_row import llama_cpp_row
    from ..default_model.gguf import default_gguf

    return llama_cpp_row(default_gguf(progress=progress), args.threads, args.temperature, args.top_p)


def _write_html(bundle, report, path: Path) -> None:
    from ..apps.demo_html import html_run, record_steps
    from ..report import write_html_report

    recorded = {} if report.settings.sampling else record_steps(bundle, report, progress=_progress())
    token_text = lambda t: bundle.tokenizer.decode([t])  # noqa: E731
    write_html_report(html_run(report, recorded, token_text), path, force=True)  # checked up front
    print(f"wrote {path}")


def _progress():
    from tqdm import tqdm

    return lambda items, desc=None: tqdm(items, desc=desc, leave=False, disable=not sys.stderr.isatty())
