"""Run one fuzz target under atheris (libFuzzer), or a short smoke run of every target.

    python tools/fuzz/run.py TARGET [libFuzzer options]   # e.g. arpa -max_total_time=3600 -jobs=2
    python tools/fuzz/run.py --smoke [--seconds 15]        # every target, CI's short run

The seed corpus of TARGET is tools/fuzz/corpus/TARGET/ (read, never written); new inputs that
reach new coverage go to a scratch directory (``--work``, default a temporary one), crashes to
``crash-*`` files in the current directory. See tools/fuzz/README.md for long runs.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def fuzz_one(target: str, libfuzzer_args: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=["draftlattice"]):
        sys.path.insert(0, str(HERE))
        import targets
    function = targets.TARGETS[target]

    def one_input(data: bytes) -> None:
        try:
            function(data)
        except targets.EXPECTED:
            pass  # the documented error for bad input

    # libFuzzer's -jobs/-workers mode starts its workers through the shell with argv[0] plus the
    # options: name the interpreter, this script and the target there, so workers fuzz it too.
    command = f"{sys.executable} {Path(__file__).resolve()} {target}"
    atheris.Setup([command, *libfuzzer_args], one_input)
    atheris.Fuzz()


def smoke(seconds: int, work: Path) -> int:
    """Every target for ``seconds`` each; returns non-zero on any finding."""
    sys.path.insert(0, str(HERE))
    from targets import TARGETS

    failed = 0
    for target in TARGETS:
        scratch = work / target
        scratch.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            target,
            str(scratch),
            str(HERE / "corpus" / target),
            f"-max_total_time={seconds}",
            "-timeout=10",
            "-rss_limit_mb=4096",
            f"-artifact_prefix={work}/",
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        done = re.findall(r"Done (\d+) runs in (\d+) second", result.stderr)
        runs = done[-1][0] if done else "?"
        status = "ok" if result.returncode == 0 else f"FINDING (exit {result.returncode})"
        print(f"fuzz {target}: {runs} executions in {seconds} s: {status}")
        if result.returncode != 0:
            print(result.stderr[-4000:])
            failed += 1
    return failed


def main() -> int:
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        fuzz_one(sys.argv[1], sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="run every target briefly")
    parser.add_argument("--seconds", type=int, default=15, help="seconds per target in --smoke")
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    if not args.smoke:
        parser.error("give a TARGET or --smoke")
    with tempfile.TemporaryDirectory(prefix="dlfuzz-") as tmp:
        return smoke(args.seconds, args.work or Path(tmp))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
