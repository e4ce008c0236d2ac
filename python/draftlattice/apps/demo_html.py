"""``demo --html``: the demo's rows and, per prompt and drafted row, every step as the report
(:mod:`draftlattice.report`) shows it.

The steps come from a second, recorded pass of the drafted rows (``draft_recorder``): recording
costs a top-k and a transfer per step, which the timed pass must not pay. Greedy decoding is
deterministic, so the recorded pass decodes the same tokens as the timed one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..decode.recording import StepRecorder
from .demo import decode_once
from .demo_prompts import DemoPrompt
from .demo_report import DemoReport


def record_steps(bundle, report: DemoReport, progress=None) -> dict[tuple[int, str], StepRecorder]:
    """``(prompt index, row name) -> recorder`` for the rows that draft (greedy mode)."""
    drafted = [row for row in report.rows if row.spec.kwargs.get("draft_heads") is not None]
    recorded = {}
    items = progress(list(enumerate(report.prompts)), desc="recording") if progress else enumerate(report.prompts)
    for i, prompt in items:
        for row in drafted:
            recorder = StepRecorder(k=report.settings.k)
            spec = replace(row.spec, kwargs={**row.spec.kwargs, "draft_recorder": recorder})
            decode_once(bundle, spec, prompt, report.settings, report.settings.max_new_tokens, report.settings.seed + i)
            recorded[(i, row.name)] = recorder
    return recorded


def html_run(report: DemoReport, recorded: dict[tuple[int, str], StepRecorder], token_text) -> dict:
    """The report's ``run`` dict; ``token_text(id)`` is one token as the tokenizer decodes it."""
    rows = []
    for row in report.rows:
        histogram = Counter(row.accepted)
        entry = {
            "name": row.name,
            "block_efficiency": row.block_efficiency,
            "tokens_per_s": row.tokens_per_s,
            "identical": row.identical if row is not report.reference else True,
            "accepted_histogram": {int(a): int(n) for a, n in sorted(histogram.items())},
        }
        if row is not report.reference and not report.settings.sampling:
            same, n, prefix, total = report.agreement(row)
            entry["agreement"] = {"outputs": [same, n], "tokens": [prefix, total]}
        rows.append(entry)
    prompts = []
    for i, prompt in enumerate(report.prompts):
        runs = {}
        for row in report.rows:
            recorder = recorded.get((i, row.name))
            if recorder is not None:
                runs[row.name] = {"steps": _steps(recorder, len(row.outputs[i]), token_text)}
            elif row.outputs:  # a row that does not draft: its text, one token a step
                runs[row.name] = {"steps": [_own_token(token_text(t)) for t in row.outputs[i]]}
        prompts.append({"prompt": _prompt_text(prompt), "runs": runs})
    st = report.settings
    return {
        "title": f"draftlattice demo: {report.model}",
        "model": f"{report.model} ({report.dtype})",
        "settings": {
            "k": st.k,
            "p": st.p,
            "nodes": st.nodes,
            "alpha": st.alpha,
            "max_new_tokens": st.max_new_tokens,
            "lm": report.lm,
        },
        "rows": rows,
        "prompts": prompts,
        "notes": [note] if (note := report.agreement_note()) else [],
    }


def _own_token(text: str) -> dict:
    return {
        "committed": [text],
        "accepted": 0,
        "lattice": None,
        "drafts_before": None,
        "drafts_after": None,
        "chosen": None,
    }


def _prompt_text(prompt: DemoPrompt) -> str:
    return prompt.text if prompt.kind == "text" else f"[chat] {prompt.text}"


def _steps(recorder: StepRecorder, length: int, token_text) -> list[dict]:
    """The row's steps, cut where its output ended (a stop can fall inside a step's tokens)."""
    steps, total = [], 0
    for step in recorder.steps.get(0, []):
        committed = [step.root, *step.accepted][: length - total]
        if not committed:
            break
        total += len(committed)
        accepted = len(committed) - 1
        lattice = [  # one column per head, its k candidates
            [[token_text(t), float(p)] for t, p in zip(ids, probs)]
            for ids, probs in zip(step.lattice_ids, step.lattice_probs)
        ]
        steps.append(
            {
                "committed": [token_text(t) for t in committed],
                "accepted": accepted,
                "lattice": lattice,
                "drafts_before": [[token_text(t) for t in d] for d in step.drafts_before],
                "drafts_after": None
                if step.drafts_after is None
                else [[token_text(t) for t in d] for d in step.drafts_after],
                "chosen": step.chosen,
            }
        )
    if total < length and 0 in recorder.last:
        steps.append(
            {
                "committed": [token_text(recorder.last[0])],
                "accepted": 0,
                "lattice": None,
                "drafts_before": None,
                "drafts_after": None,
                "chosen": None,
            }
        )
    return steps
