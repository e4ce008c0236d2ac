"""The full evaluation of one trace, and its tables (the paper's layouts), plots and JSON.

``evaluate_trace`` runs every analysis and returns a JSON-able dict; ``format_tables`` prints it
as Kim et al. 2024's Table 4 (block efficiency per drafter), Table 3 (consecutive repetition
before/after rescoring), Table 5 (wins/ties/losses) plus heads, alpha tuning and adaptive
drafting; ``write_report`` writes ``results.json``, ``tables.txt`` and the Figure 6/7 PNGs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

from . import analyses, metrics
from .adaptive import compare_adaptive
from .drafting import BestPrefixes, LiveDrafter, NgramRescore, Oracle, TraceView, Vanilla
from .replay import replay

logger = logging.getLogger(__name__)


def evaluate_trace(
    trace,
    lm,
    *,
    k: int = 16,
    p: int = 16,
    alpha: float = 0.5,
    ks: Sequence[int] = (1, 2, 4, 8, 16),
    ps: Sequence[int] = (1, 2, 4, 8, 16),
    tune_alpha: bool = False,
    alphas: Sequence[float] = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0),
    heldout_fraction: float = 0.25,
    adaptive: bool = True,
    entropy_threshold: float = 3.0,
    accuracy_threshold: float = 0.1,
    num_threads: int | None = None,
    neural=None,
) -> dict:
    """All analyses of ``trace`` with n-gram LM ``lm`` (k candidates per head, p drafts).

    ``neural``: an optional engine drafter (e.g. :class:`draftlattice.decode.NeuralDrafter`)
    replayed for Table 4's neural rescoring row.

    With ``tune_alpha`` alpha is chosen on the first ``heldout_fraction`` of the prompts and
    every number is reported on the remaining prompts (Appendix E); otherwise on all prompts.
    """
    view = TraceView(trace)
    if not 1 <= k <= trace.top_k:
        raise ValueError(
            f"k={k} candidates per head: the trace records only the top {trace.top_k} "
            f"(record with `trace record --top-k {k}` or lower k)"
        )
    if p < 1:
        raise ValueError(f"p={p} drafts: must be at least 1")
    out: dict = {
        "meta": trace.meta,
        "prompts": len(trace),
        "positions": trace.num_positions,
        "num_heads": trace.num_heads,
        "top_k": trace.top_k,
        "k": k,
        "p": p,
    }
    report = None
    if tune_alpha:
        tuned = analyses.tune_alpha(view, lm, k, 1, alphas, heldout_fraction, num_threads)
        alpha, report = tuned["alpha"], tuned["report_prompts"]
        out["alpha_tuning"] = {key: v for key, v in tuned.items() if key != "block_efficiency_rest"}
    out["alpha"] = alpha
    out["report_prompts"] = len(report) if report is not None else len(trace)

    def be(spec) -> float:
        return replay(view, spec, report, num_threads).block_efficiency

    table4 = {"baseline (vanilla)": be(Vanilla())}
    table4[f"{lm.order}-gram rescoring"] = be(NgramRescore(lm, k, 1, alpha))
    table4[f"{p}-best 0-gram"] = be(NgramRescore(lm, k, p, 0.0))
    table4[f"{p}-best {lm.order}-gram"] = be(NgramRescore(lm, k, p, alpha))
    # beyond the paper: a token tree of the rescored lattice's p best prefixes (p nodes, where the
    # p best drafts verify up to p * (h - 1))
    table4[f"{p} prefixes {lm.order}-gram"] = be(BestPrefixes(lm, k, p, alpha))
    table4["neural rescoring"] = be(LiveDrafter(neural)) if neural is not None else None
    table4[f"oracle k={k}"] = be(Oracle(k))
    out["table4"] = table4

    rescored = NgramRescore(lm, k, 1, alpha)
    out["comparison"] = analyses.compare_drafters(view, Vanilla(), rescored, report, num_threads)
    entropy, accuracy = metrics.head_entropy(trace), metrics.head_accuracy(trace)
    out["heads"] = {
        "mean_entropy_nats": entropy.tolist(),
        "top1_accuracy": accuracy.tolist(),
        "entropy_threshold": entropy_threshold,
        "accuracy_threshold": accuracy_threshold,
        "h_max_entropy": metrics.h_max_entropy(entropy, entropy_threshold),
        "h_max_accuracy": metrics.h_max_accuracy(accuracy, accuracy_threshold),
    }
    out["figure6_oracle"] = {int(kk): be(Oracle(kk)) for kk in ks if kk <= trace.top_k}
    out["figure7_pbest"] = {int(pp): be(NgramRescore(lm, k, int(pp), alpha)) for pp in ps}
    out["figure7_pbest_0gram"] = {int(pp): be(NgramRescore(lm, k, int(pp), 0.0)) for pp in ps}
    if adaptive and len(trace) >= 2:
        out["adaptive"] = compare_adaptive(
            view, lm, min(4, k), alpha, heldout_fraction=heldout_fraction, num_threads=num_threads
        )
    return out


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def format_tables(result: dict) -> str:
    lines = [
        f"{result['prompts']} prompts, {result['positions']} positions, h={result['num_heads']}, "
        f"k={result['k']}, alpha={result['alpha']:g} (reported on {result['report_prompts']} prompts)",
        "",
    ]
    lines += ["Table 4: block efficiency (decoded tokens per serial call)", f"{'drafter':<24}{'BE':>8}"]
    lines += [f"{name:<24}{_fmt(v):>8}" for name, v in result["table4"].items()]
    c = result["comparison"]
    lines += [
        "",
        "Table 3: consecutive repetition in drafts (all full-block positions)",
        f"{'drafts':<24}{'% repeated':>12}{'max run':>10}",
        f"{'before (vanilla)':<24}{c['repetition_base']['repeated_pct']:>12.2f}{c['repetition_base']['mean_max_run']:>10.3f}",
        f"{'after (rescored)':<24}{c['repetition_other']['repeated_pct']:>12.2f}{c['repetition_other']['mean_max_run']:>10.3f}",
        "",
        "Table 5: rescored vs vanilla top-1 drafts, per position",
        f"{'wins %':>8}{'ties %':>8}{'losses %':>10}{'repaired %':>12}{'introduced %':>14}",
        f"{c['wins_pct']:>8.2f}{c['ties_pct']:>8.2f}{c['losses_pct']:>10.2f}{c['repaired_pct']:>12.2f}{c['introduced_pct']:>14.2f}",
    ]
    hd = result["heads"]
    lines += ["", "Heads (section 6.2)", f"{'head':>6}{'entropy':>10}{'top-1 acc':>11}"]
    lines += [
        f"{j + 1:>6}{e:>10.3f}{a:>11.3f}" for j, (e, a) in enumerate(zip(hd["mean_entropy_nats"], hd["top1_accuracy"]))
    ]
    lines += [
        f"h_max: {hd['h_max_entropy']} (mean entropy <= {hd['entropy_threshold']} nats), "
        f"{hd['h_max_accuracy']} (top-1 accuracy >= {hd['accuracy_threshold']})"
    ]
    lines += [
        "",
        "Figure 6: oracle top-k block efficiency",
        "  " + "  ".join(f"k={kk}: {v:.3f}" for kk, v in result["figure6_oracle"].items()),
    ]
    lines += [
        "Figure 7: p-best block efficiency (alpha, then 0-gram)",
        "  " + "  ".join(f"p={pp}: {v:.3f}" for pp, v in result["figure7_pbest"].items()),
        "  " + "  ".join(f"p={pp}: {v:.3f}" for pp, v in result["figure7_pbest_0gram"].items()),
    ]
    if "alpha_tuning" in result:
        t = result["alpha_tuning"]
        lines += [
            "",
            f"alpha tuned on {len(t['heldout_prompts'])} held-out prompts: "
            + "  ".join(f"{a:g}: {v:.3f}" for a, v in t["heldout_curve"].items())
            + f" -> alpha={t['alpha']:g}",
        ]
    if "adaptive" in result:
        a = result["adaptive"]
        lines += [
            "",
            f"Entropy-adaptive drafting (k={a['k']}), reported on {a['report_prompts']} prompts",
            f"{'drafter':<44}{'drafts/call':>12}{'BE':>8}",
        ]
        lines += [f"{f['name']:<44}{f['cost']:>12.3f}{f['block_efficiency']:>8.3f}" for f in a["fixed_rest"]]
        ch = a["chosen_on_rest"]
        lines += [
            f"{ch['name']:<44}{ch['cost']:>12.3f}{ch['block_efficiency']:>8.3f}",
            f"best fixed mix at equal cost: {ch['fixed_hull_at_cost']:.3f} (margin {ch['margin']:+.3f})",
        ]
    return "\n".join(lines) + "\n"


def write_report(result: dict, out_dir: str | Path) -> list[Path]:
    """results.json, tables.txt, figure6_oracle.png, figure7_pbest.png in ``out_dir``."""
    return write_results(result, out_dir) + write_figures(result, out_dir)


def write_results(result: dict, out_dir: str | Path) -> list[Path]:
    """results.json and tables.txt in ``out_dir`` (no plotting dependency)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.json", out / "tables.txt"]
    paths[0].write_text(json.dumps(result, indent=2, default=float) + "\n")
    paths[1].write_text(format_tables(result))
    return paths


def write_figures(result: dict, out_dir: str | Path) -> list[Path]:
    """figure6_oracle.png and figure7_pbest.png; ImportError naming the extra without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("plots need matplotlib: pip install 'draftlattice[plot]'") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "figure6_oracle.png", out / "figure7_pbest.png"]
    base = result["table4"]["baseline (vanilla)"]
    for path, series, xlabel in (
        (paths[0], {"oracle": result["figure6_oracle"]}, "k (candidates per head)"),
        (
            paths[1],
            {f"alpha={result['alpha']:g}": result["figure7_pbest"], "0-gram": result["figure7_pbest_0gram"]},
            "p (drafts verified)",
        ),
    ):
        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        for label, curve in series.items():
            ax.plot(list(curve), list(curve.values()), marker="o", label=label)
        ax.axhline(base, color="grey", linestyle="--", label="vanilla")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("block efficiency")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return paths
