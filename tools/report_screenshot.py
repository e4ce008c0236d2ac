"""Render a run JSON as the HTML report and screenshot it with headless Chromium (for the docs).

    python tools/report_screenshot.py RUN_JSON OUT_PNG [--html OUT_HTML] [--step p0-r1-s3]
        [--width 1280] [--height 1600] [--force]

RUN_JSON follows draftlattice.report's schema (the demo writes it). The page is written to
``--html`` (default: a temporary file, removed afterwards); ``--step`` opens that prompt, row and
step first (the page's ``#p<prompt>-r<row>-s<step>`` link, all from 0). Needs Chromium
(``apt-get install chromium``) and draftlattice importable (installed, or PYTHONPATH=python).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from draftlattice.cli._output import check_output
from draftlattice.report import write_html_report
from draftlattice.report.browser import screenshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_json", type=Path, help="the run description (JSON)")
    parser.add_argument("out_png", type=Path, help="the screenshot to write")
    parser.add_argument("--html", type=Path, help="also keep the HTML page here")
    parser.add_argument("--step", default="", help="open this step first, e.g. p0-r1-s3")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1600)
    parser.add_argument("--force", action="store_true", help="overwrite existing outputs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        run = json.loads(args.run_json.read_text(encoding="utf-8"))
        png = check_output(args.out_png, force=args.force, inputs=[args.run_json, args.html])
        if args.html is not None:
            check_output(args.html, force=args.force, inputs=[args.run_json])
        with tempfile.TemporaryDirectory(prefix="report-") as tmp:
            page = write_html_report(run, args.html or Path(tmp) / "report.html", force=args.force)
            screenshot(page, png, width=args.width, height=args.height, fragment=args.step)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"report_screenshot: {e}", file=sys.stderr)
        return 1
    print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
