"""See the drafts: one self-contained HTML page describing a decoding run.

``write_html_report(run, "report.html")`` (or ``render_html(run)`` for the text) turns a
JSON-able description of a run into a single HTML file that needs no network when viewed: CSS,
JavaScript and SVG charts are inline, fonts are the system's, and a Content-Security-Policy
forbids every fetch.

The input (:class:`~draftlattice.report.schema.Run`, checked by
:func:`~draftlattice.report.schema.validate_run`; every error a ``ValueError`` naming the field)::

    run = {
      "title": str, "model": str, "settings": {str: JSON value},
      "rows": [{"name": str,                      # one per drafter (unique)
                "block_efficiency": float,        # tokens per serial call of the target
                "tokens_per_s": float | None,     # None: not timed (a trace replay)
                "identical": bool | None,         # output identical to greedy? None: not checked
                "accepted_histogram": {int: int}, # accepted draft length -> steps (JSON: "2": 17)
                "agreement": {"outputs": [int, int],  # optional: outputs equal to the reference's / compared,
                              "tokens": [int, int]},  # tokens before each output's first difference / all
               }, ...],
      "prompts": [{"prompt": str,                 # as the tokenizer decodes it
                   "runs": {row_name: {"steps": [{   # a row may be missing for a prompt
                      "committed": [str, ...],    # tokens committed by the step, in order: first
                                                  # the target's own token(s), then the accepted ones
                      "accepted": int,            # how many of committed came from the accepted draft
                      "lattice": [[[token, prob], ... k], ... h-1 columns] | None,  # heads 2..h
                      "drafts_before": [[token, ...], ... p] | None,  # p best by the heads alone
                      "drafts_after": [[token, ...], ...] | None,   # the drafts verified, where not
                                                  # drafts_before (n-gram rescoring, best prefixes)
                      "chosen": int | None,       # index in drafts_after (drafts_before when
                                                  # drafts_after is None) of the accepted draft;
                                                  # it must start with committed[-accepted:]
                   }, ...]}}}, ...],
      "curves": {"oracle_topk": [[k, value], ...], "pbest": [[p, value], ...]} | None,  # optional
      "notes": [str, ...],                        # optional: sentences under the summary table
    }

Tokens are decoded strings (``" the"``, not ``"Ġthe"``); probabilities lie in [0, 1]; unknown
keys are errors. Numbers may be numpy scalars.

The page, top to bottom: a header (title, model, settings); a summary (the rows' table, whose
last column says "identical" or, with ``agreement``, how many outputs and what share of tokens
agree with the reference, then bar charts of block efficiency and tokens/s, then the notes); the explorer; one accepted-length histogram per row;
and with ``curves`` the oracle top-k and p-best line charts. The explorer has a prompt selector
and one tab per row. It shows the prompt (muted) and the generated text, every token shaded by
the step that committed it (alternating shades) and marked by origin: accepted draft tokens
blue with a solid underline, the target's own tokens orange, bold, with a dotted underline (a
legend says so). Hovering a token shows its step; clicking keeps it (arrow keys move on, and the
address gets ``#p0-r1-s3``, prompt, row and step from 0, which also opens that step when
loaded; by default the first step with a lattice of prompt 0, row 0). A step's view lists its
committed tokens, the lattice as a table (heads as columns, ranks as rows, each cell token and
probability over a probability bar, the accepted tokens outlined), and the drafts before and
as verified (rescored, or the best prefixes), the accepted draft's accepted prefix highlighted
and its first rejected token struck through. In these views whitespace is visible (``·`` space, ``↵`` newline, ``⇥`` tab;
see :mod:`~draftlattice.report.tokens`).

Every string is escaped: a prompt or token ``<script>...`` shows as text (details in
:mod:`~draftlattice.report.html`). :mod:`~draftlattice.report.browser` screenshots a page with
headless Chromium (``tools/report_screenshot.py RUN_JSON OUT_PNG``).
"""

from __future__ import annotations

from .html import render_html, write_html_report
from .schema import Agreement, Curves, Prompt, Row, RowRun, Run, Step, validate_run
from .tokens import visible

__all__ = [
    "Agreement",
    "Curves",
    "Prompt",
    "Row",
    "RowRun",
    "Run",
    "Step",
    "render_html",
    "validate_run",
    "visible",
    "write_html_report",
]
