"""The report page's sections as HTML strings: header, summary, explorer, distributions.

Every string taken from the run is escaped here; numbers are formatted here. The explorer's
per-step details are not HTML: :mod:`~draftlattice.report.explorer` turns them into JSON that the
page's script renders.
"""

from __future__ import annotations

import json
from html import escape

from . import charts
from .explorer import panel_id, panel_stats, text_html
from .schema import Row, Run


def header(run: Run) -> str:
    rows = "".join(
        f"<tr><th>{escape(key)}</th><td>{escape(value if isinstance(value, str) else json.dumps(value))}</td></tr>"
        for key, value in run["settings"].items()
    )
    return (
        f'<header><h1>{escape(run["title"])}</h1><p class="model">Model: <b>{escape(run["model"])}</b></p>'
        f'<details class="settings"><summary>Settings</summary><table>{rows}</table></details></header>'
    )


def _rate(value: float | None) -> str:
    return "not timed" if value is None else f"{value:.1f}"


def _agreement(row: Row) -> str:
    """The summary's cell: identity, or how far the outputs agree with the reference's."""
    agreement = row.get("agreement")
    if row["identical"] is None:
        return '<td class="agreement">not checked</td>'
    if row["identical"]:
        return '<td class="agreement">identical</td>'
    if agreement is None:
        return '<td class="agreement">differs</td>'
    (same, outputs), (tokens, total) = agreement["outputs"], agreement["tokens"]
    share = f"{100 * tokens / total:.0f}%" if total else "-"
    title = (
        f"{same} of {outputs} outputs equal the reference's; {tokens} of its {total} tokens come "
        "before the first difference of their output"
    )
    return f'<td class="agreement" title="{escape(title)}">{same}/{outputs} outputs, {share} of tokens</td>'


def summary(run: Run) -> str:
    rows = run["rows"]
    names = [r["name"] for r in rows]
    table = "".join(
        f"<tr><th>{_swatch(i)}{escape(r['name'])}</th>"
        f"<td>{r['block_efficiency']:.3f}</td><td>{_rate(r['tokens_per_s'])}</td>{_agreement(r)}</tr>"
        for i, r in enumerate(rows)
    )
    notes = "".join(f'<p class="note">{escape(note)}</p>' for note in run.get("notes", []))
    bars = [
        charts.bar_chart(
            "Block efficiency (tokens per serial call)", names, [r["block_efficiency"] for r in rows], "{:.3f}".format
        ),
    ]
    if any(r["tokens_per_s"] is not None for r in rows):
        rates = [r["tokens_per_s"] or 0.0 for r in rows]
        bars.append(charts.bar_chart("Tokens per second", names, rates, "{:.1f}".format))
    return (
        '<section id="summary"><h2>Summary</h2><div class="charts bars">'
        '<table class="rows"><thead><tr><th>drafter</th><th>block efficiency</th><th>tokens/s</th>'
        f"<th>agreement with greedy</th></tr></thead><tbody>{table}</tbody></table>"
        f"{''.join(bars)}</div>{notes}</section>"
    )


def distributions(run: Run) -> str:
    rows = run["rows"]
    top = max((n for r in rows for n in r["accepted_histogram"]), default=0)
    lengths = list(range(top + 1))
    hists = [charts.histogram(r["name"], r["accepted_histogram"], lengths, charts.color(i)) for i, r in enumerate(rows)]
    parts = [
        '<section id="distributions"><h2>Accepted draft length per step</h2>',
        f'<div class="charts histograms">{"".join(hists)}</div>',
    ]
    curves = run.get("curves")
    if curves:
        lines = []
        if "oracle_topk" in curves:
            lines.append(
                charts.line_chart(
                    "Oracle draft in the top-k lattice", {"oracle": curves["oracle_topk"]}, "k", "block efficiency"
                )
            )
        if "pbest" in curves:
            lines.append(
                charts.line_chart("p best drafts verified", {"p-best": curves["pbest"]}, "p", "block efficiency")
            )
        parts.append(f'<h2>Curves</h2><div class="charts curves">{"".join(lines)}</div>')
    return "".join(parts) + "</section>"


def explorer(run: Run) -> str:
    names = [r["name"] for r in run["rows"]]
    options = "".join(
        f'<option value="{i}">{i + 1}: {escape(_preview(p["prompt"]))}</option>' for i, p in enumerate(run["prompts"])
    )
    tabs = "".join(
        f'<button type="button" class="tab" role="tab" data-row="{r}" aria-selected="{str(r == 0).lower()}">'
        f"{_swatch(r)}{escape(name)}</button>"
        for r, name in enumerate(names)
    )
    panels = []
    for i, prompt in enumerate(run["prompts"]):
        for r, name in enumerate(names):
            hidden = "" if (i, r) == (0, 0) else " hidden"
            head = f'<div class="panel" id="panel-{panel_id(i, r)}" data-prompt="{i}" data-row="{r}"{hidden}>'
            if name not in prompt["runs"]:
                panels.append(f'{head}<p class="missing">{escape(name)} was not run on this prompt.</p></div>')
                continue
            steps = prompt["runs"][name]["steps"]
            panels.append(
                f'{head}<p class="panel-stats">{escape(name)}: {panel_stats(steps)}</p>'
                f'<p class="text">{text_html(prompt, steps)}</p></div>'
            )
    if not panels:
        panels.append('<p class="missing">No prompts were recorded.</p>')
    return (
        '<section id="explorer"><h2>Drafts, step by step</h2>'
        f'<div class="controls"><label>Prompt <select id="prompt-select">{options}</select></label>'
        f'<div class="tabs" role="tablist">{tabs}</div></div>'
        '<p class="legend"><span class="tok s0 own">target&#39;s own token</span> '
        '<span class="tok s0 acc">accepted draft token</span> '
        '<span class="tok s0 acc">one</span><span class="tok s1 acc">shade</span><span class="tok s0 own">per</span>'
        '<span class="tok s1 own">step</span> '
        '<span class="hint">Hover a token to see its step; click to keep it; arrow keys step through. '
        "In tables: · space, ↵ newline, ⇥ tab.</span></p>"
        f'<div class="explorer-body"><div class="panels">{"".join(panels)}</div>'
        '<aside id="step-detail" aria-live="polite"><p class="hint">Hover or click a token of the text.</p></aside></div>'
        "<noscript><p>The step details (lattice and drafts) need JavaScript.</p></noscript></section>"
    )


def _swatch(i: int) -> str:
    return f'<svg class="swatch" width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="{charts.color(i)}"/></svg>'


def _preview(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
