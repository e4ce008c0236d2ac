"""The step explorer's content: the generated text as token spans, and each step's details as data.

The text is HTML written here (escaped): one ``<span class="tok">`` per committed token with its
step index, alternating step shading (``s0``/``s1``) and its origin (``acc``: from the accepted
draft, ``own``: the target's own token). The per-step details (lattice, drafts) are JSON that the
page's script turns into tables with ``textContent`` only; token strings in it are already made
readable (:func:`~draftlattice.report.tokens.visible`), so the script formats nothing but numbers.
"""

from __future__ import annotations

from html import escape

from .schema import Prompt, Step
from .tokens import visible


def panel_id(prompt_index: int, row_index: int) -> str:
    """The id shared by a (prompt, row) panel, its JSON entry and its links (``#p0-r1-s3``)."""
    return f"p{prompt_index}-r{row_index}"


def text_html(prompt: Prompt, steps: list[Step]) -> str:
    """The prompt (muted) followed by the generated tokens as spans marked by step and origin."""
    parts = [f'<span class="prompt-text">{escape(prompt["prompt"])}</span>']
    for j, step in enumerate(steps):
        own = len(step["committed"]) - step["accepted"]
        for i, token in enumerate(step["committed"]):
            classes = ["tok", f"s{j % 2}", "own" if i < own else "acc"]
            if "\n" in token:
                classes.append("nl")
            parts.append(f'<span class="{" ".join(classes)}" data-step="{j}">{escape(token)}</span>')
    return "".join(parts)


def panel_stats(steps: list[Step]) -> str:
    """One line: tokens, steps and tokens per step (this prompt's block efficiency, prefill aside)."""
    tokens = sum(len(s["committed"]) for s in steps)
    per_step = f"{tokens / len(steps):.2f}" if steps else "-"
    return f"{tokens} tokens in {len(steps)} steps ({per_step} tokens per step)"


def step_data(step: Step) -> dict:
    """A step in display form for the page's script (see the module docstring)."""
    committed = step["committed"]
    accepted = step["accepted"]
    before, after, chosen = step["drafts_before"], step["drafts_after"], step["chosen"]
    chosen_in = None if chosen is None else ("after" if after is not None else "before")
    before_rank = None
    if chosen_in == "before":
        before_rank = chosen
    elif chosen_in == "after" and before is not None and after[chosen] in before:
        before_rank = before.index(after[chosen])
    return {
        "committed": [visible(t) for t in committed],
        "own": len(committed) - accepted,
        "accepted": accepted,
        "lattice": _lattice(step["lattice"]),
        "path": _path(step["lattice"], committed[len(committed) - accepted :]),
        "before": _drafts(before),
        "after": _drafts(after),
        "chosen": chosen,
        "chosen_in": chosen_in,
        "before_rank": before_rank,
    }


def _lattice(lattice: list[list[tuple[str, float]]] | None) -> list | None:
    if lattice is None:
        return None
    return [[[visible(token), round(prob, 6)] for token, prob in column] for column in lattice]


def _path(lattice: list[list[tuple[str, float]]] | None, prefix: list[str]) -> list[int] | None:
    """Per lattice column, the rank of the accepted token there (-1: none accepted at that head)."""
    if lattice is None:
        return None
    path = []
    for j, column in enumerate(lattice):
        tokens = [token for token, _ in column]
        path.append(tokens.index(prefix[j]) if j < len(prefix) and prefix[j] in tokens else -1)
    return path


def _drafts(drafts: list[list[str]] | None) -> list[list[str]] | None:
    return None if drafts is None else [[visible(t) for t in draft] for draft in drafts]
