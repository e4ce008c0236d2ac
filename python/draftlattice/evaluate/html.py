"""``eval --html``: a trace replay's results as the HTML report (:mod:`draftlattice.report`).

A replay measures block efficiency only (no wall-clock time, no per-step text to show), so the
page holds Table 4's rows and the paper's curves: the oracle's block efficiency against k
(Figure 6) and the p-best rescored drafts' against p (Figure 7).
"""

from __future__ import annotations


def eval_run(result: dict, title: str, lm_name: str) -> dict:
    """The report's ``run`` dict of :func:`draftlattice.evaluate.report.evaluate_trace`'s result."""
    rows = [
        {"name": name, "block_efficiency": value, "tokens_per_s": None, "identical": None, "accepted_histogram": {}}
        for name, value in result["table4"].items()
        if value is not None
    ]
    settings = {key: result[key] for key in ("k", "p", "alpha") if key in result}
    return {
        "title": title,
        "model": title.removeprefix("draftlattice eval: "),
        "settings": {**settings, "lm": str(lm_name)},
        "rows": rows,
        "prompts": [],
        "curves": {
            "oracle_topk": [[int(k), float(v)] for k, v in result["figure6_oracle"].items()],
            "pbest": [[int(p), float(v)] for p, v in result["figure7_pbest"].items()],
        },
    }
