"""`draftlattice demo`: blockwise decoding of WikiText-2 test prompts with the shipped artifacts.

Compares vanilla drafts, n-gram lattice rescoring (1-best, and p-best verified as a tree), local
neural rescoring (when lm_models/neural_rescorer exists) and the oracle; prints the block
efficiency table and a few drafts before/after rescoring, and checks that every output is
identical to plain greedy decoding of the target.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..pairing import ALLOW_MISMATCH_HELP
from ._output import FORCE_HELP, atomic_file, check_output


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="blockwise decoding demo: vanilla vs n-gram rescored vs p-best vs oracle",
        description="Decode WikiText-2 test prompts with the shipped blockwise model and compare "
        "drafters by block efficiency (tokens per serial call of the target). Outputs are checked "
        "to be identical to greedy decoding.",
    )
    p.add_argument("--quick", action="store_true", help="2 prompts x 16 tokens (CI smoke run)")
    p.add_argument("--prompts", type=int, default=20, help="number of prompts (default 20)")
    p.add_argument("--prompt-tokens", type=int, default=32, help="prompt length in tokens")
    p.add_argument("--max-new-tokens", type=int, default=64, help="tokens generated per prompt")
    p.add_argument("--k", type=int, default=8, help="lattice candidates per head")
    p.add_argument("--p", type=int, default=4, help="drafts of the p-best row")
    p.add_argument("--alpha", type=float, default=0.5, help="n-gram LM weight")
    p.add_argument("--neural-alpha", type=float, default=0.5, help="neural rescorer weight")
    p.add_argument("--lm", default="katz4.dlm", help="n-gram LM inside lm_models/ (or a path)")
    p.add_argument(
        "--models", type=Path, help="shipped-models directory (default: $DRAFTLATTICE_MODELS or the shipped lm_models/)"
    )
    p.add_argument(
        "--data",
        type=Path,
        help="WikiText-2 test.txt (default: wikitext-2/test.txt in the shared data directory, $DRAFTLATTICE_DATA)",
    )
    p.add_argument("--examples", type=int, default=3, help="drafts before/after rescoring to show")
    p.add_argument("--allow-mismatch", action="store_true", help=ALLOW_MISMATCH_HELP)
    p.add_argument(
        "--temperature",
        type=float,
        help="lossless sampling at this temperature instead of greedy "
        "(rows: vanilla, ngram 1 draft, ngram p-best tree, ngram p sampled)",
    )
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus of the sampling mode (default 1: off)")
    p.add_argument(
        "--sample-alpha",
        type=_weight_or_auto,
        default=0.2,
        help="n-gram LM weight of sampled drafts (default 0.2), or 'auto': tuned first for the expected "
        "accepted length on held-out WikiText-2 valid prompts (see --calibration-prompts)",
    )
    p.add_argument(
        "--calibration-prompts",
        type=int,
        default=8,
        help="prompts of WikiText-2 valid.txt (beside the test file) that --sample-alpha auto tunes on (default 8)",
    )
    p.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the table and the texts as JSON: "
        '{"rows": [{"name", "block_efficiency", "tokens_per_s", ...}], "outputs": [text per prompt]}; '
        "outputs are the target's greedy continuations, or with --temperature the vanilla row's "
        "sampled continuations",
    )
    p.add_argument("--force", action="store_true", help=FORCE_HELP + " (the --json file)")
    p.set_defaults(func=_demo)


def _weight_or_auto(text: str) -> float | str:
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a weight >= 0 or 'auto', got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a weight >= 0 or 'auto', got {text!r}")
    return value


def _demo(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        raise ValueError("draftlattice demo needs PyTorch: pip install torch==2.13.0 (see README)") from None

    from ..apps.demo import DemoSettings, run_demo
    from ..assets import WIKITEXT_TEST, data_file, model_asset

    if args.quick:
        args.prompts, args.max_new_tokens = 2, 16
    data = args.data or data_file(WIKITEXT_TEST)
    lm_path = Path(args.lm) if Path(args.lm).exists() else model_asset(args.lm, args.models)
    from ..filekinds import expect_lm, expect_text

    expect_lm(lm_path)
    expect_text(data)
    if args.json is not None:
        check_output(args.json, force=args.force, inputs=[lm_path, data])
    settings = DemoSettings(
        num_prompts=args.prompts,
        prompt_tokens=args.prompt_tokens,
        max_new_tokens=args.max_new_tokens,
        k=args.k,
        p=args.p,
        alpha=args.alpha,
        neural_alpha=args.neural_alpha,
    )
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    if args.temperature is not None:
        from ..apps.sampling_demo import run_sampling_demo
        from ..decode.sampling import SamplingConfig

        sampling = SamplingConfig(temperature=args.temperature, top_p=args.top_p)
        calibration = None
        if args.sample_alpha == "auto":
            calibration = (args.data.parent if args.data else data_file(WIKITEXT_TEST).parent) / "valid.txt"
            expect_text(calibration)
        report = run_sampling_demo(
            model_asset("default", args.models),
            lm_path,
            data,
            settings,
            sampling,
            args.sample_alpha,
            progress=_progress(),
            allow_mismatch=args.allow_mismatch,
            calibration_path=calibration,
            calibration_prompts=args.calibration_prompts,
        )
        print(report.render())
        _write_json(args.json, report.to_json())
        return 0
    report = run_demo(
        model_asset("default", args.models),
        lm_path,
        data,
        settings,
        progress=_progress(),
        allow_mismatch=args.allow_mismatch,
    )
    print(report.render(args.examples))
    _write_json(args.json, report.to_json())
    if not report.all_identical:
        print("ERROR: some outputs differ from greedy decoding", file=sys.stderr)
        return 1
    return 0


def _write_json(path: Path | None, data: dict) -> None:
    if path is not None:
        with atomic_file(path) as tmp:
            tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _progress():
    from tqdm import tqdm

    return lambda items, desc=None: tqdm(items, desc=desc, leave=False, disable=not sys.stderr.isatty())
