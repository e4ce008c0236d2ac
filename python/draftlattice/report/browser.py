"""Headless Chromium over a report page: a PNG screenshot, or the DOM after the page's script ran.

Chromium is looked up as ``$DRAFTLATTICE_CHROMIUM``, else ``chromium``, ``chromium-browser``,
``google-chrome`` on PATH (Debian: ``apt-get install chromium``). Each call starts a fresh
browser with a throwaway profile, so calls may run side by side.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The Chromium executable to use, or None when there is none."""
    override = os.environ.get("DRAFTLATTICE_CHROMIUM")
    if override:
        return shutil.which(override)
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def screenshot(
    page: str | os.PathLike,
    png: str | os.PathLike,
    *,
    width: int = 1280,
    height: int = 1600,
    fragment: str = "",
    timeout: float = 120,
) -> Path:
    """Screenshot of the HTML file ``page`` (``#fragment`` appended to its URL) into ``png``."""
    out = Path(png).resolve()
    _run([f"--window-size={width},{height}", f"--screenshot={out}"], page, fragment, timeout)
    if not out.is_file() or out.stat().st_size == 0:
        raise RuntimeError(f"{out}: Chromium wrote no screenshot")
    logger.info("screenshot of %s: %s (%d bytes)", page, out, out.stat().st_size)
    return out


def dump_dom(page: str | os.PathLike, *, fragment: str = "", timeout: float = 120) -> str:
    """The serialised DOM of the HTML file ``page`` after load (so after its script ran)."""
    return _run(["--dump-dom"], page, fragment, timeout).stdout


def _run(args: list[str], page: str | os.PathLike, fragment: str, timeout: float) -> subprocess.CompletedProcess:
    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium, or set DRAFTLATTICE_CHROMIUM)")
    path = Path(page).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such page")
    url = path.as_uri() + (f"#{fragment}" if fragment else "")
    with tempfile.TemporaryDirectory(prefix="dl-chromium-") as profile:
        command = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",
            *args,
            url,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"Chromium failed ({done.returncode}) on {url}: {done.stderr.strip()[-2000:]}")
    return done
