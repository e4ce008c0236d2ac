"""One self-contained HTML page from a run (see the package docstring), and writing it safely.

Every string from the run is escaped here (``html.escape``); the step data travels as JSON in a
``<script type="application/json">`` whose ``<``, ``>`` and ``&`` are written as ``\\u003c``,
``\\u003e``, ``\\u0026``, so no data can close the element; the page's script parses it with
``JSON.parse`` and builds the detail view with ``textContent``. A Content-Security-Policy allows
no network access and only the page's own style and script (by hash), so even a failure of the
escaping could not run an injected script.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from html import escape
from importlib import resources
from pathlib import Path

from ..cli._output import atomic_file, check_output
from . import sections
from .explorer import panel_id, step_data
from .schema import Run, validate_run

logger = logging.getLogger(__name__)


def render_html(run: Run) -> str:
    """The report page for ``run`` (validated first: ``ValueError`` naming the bad field)."""
    run = validate_run(run)
    style = _asset("report.css")
    script = _asset("report.js")
    csp = f"default-src 'none'; style-src '{_sha256(style)}'; script-src '{_sha256(script)}'; img-src data:"
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(run['title'])}</title>",
            f"<style>{style}</style></head><body>",
            sections.header(run),
            sections.summary(run),
            sections.explorer(run),
            sections.distributions(run),
            f'<script type="application/json" id="run-data">{_json_island(run)}</script>',
            f"<script>{script}</script>",
            "</body></html>",
        ]
    )


def write_html_report(run: Run, path: str | os.PathLike, *, force: bool = False) -> Path:
    """Render ``run`` to ``path`` with the CLI's policy: refuse an existing file unless ``force``,
    write beside it under a temporary name and rename when complete. Returns the path."""
    out = check_output(path, force=force)
    page = render_html(run)
    with atomic_file(out) as tmp:
        tmp.write_text(page, encoding="utf-8")
    logger.info("wrote the HTML report %s (%d bytes)", out, len(page.encode("utf-8")))
    return out


def _json_island(run: Run) -> str:
    """The step data as JSON that cannot end its ``<script>`` element (``<>&`` as \\u escapes)."""
    panels = {}
    for i, prompt in enumerate(run["prompts"]):
        for r, row in enumerate(run["rows"]):
            if row["name"] in prompt["runs"]:
                panels[panel_id(i, r)] = [step_data(s) for s in prompt["runs"][row["name"]]["steps"]]
    text = json.dumps({"panels": panels}, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
