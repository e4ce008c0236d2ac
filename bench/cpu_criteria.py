"""Does this CPU meet the lean step's targets (issue 37)? Reads what ``bench/cpu_session.sh`` wrote
(``step_cost.json``, the demo's ``demo.json`` / ``demo_fp32.json`` / ``demo_T07.json`` and, on
an AMX CPU, ``demo_amx.json`` (the main job on the AMX kernel), ``timings.txt``, ``lscpu.txt``)
and prints each target with the figure it was judged on:

- the best drafted greedy row against plain llama.cpp (>= 1x; 1.5x the aim) and against eager
  ``generate()`` (>= 3x on an AMX CPU, >= 1.5x on an AVX2-only one), and no drafted row slower
  than ``generate()``;
- the plain target's one-token step (<= 25 ms) and a 16-node verification (<= 1.3x it; AMX);
- with ``--dtype float32`` every drafted greedy output identical to ``generate()``'s;
- the main job (``draftlattice demo`` with defaults) under 180 s.

    python bench/cpu_criteria.py DIR [--markdown]

Missing files are reported as not measured, not as failures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: the demo's rows that are not draftlattice's drafted decoding
REFERENCE_ROWS = ("generate", "prompt_lookup", "llama_cpp", "lean")
STEP_TARGET_MS, FLAT_TARGET = 25.0, 1.3


def cpu_kind(lscpu: str) -> str:
    """AMX, AVX-512 or AVX2-only, from ``lscpu``'s flags."""
    flags = set(lscpu.split())
    if "amx_bf16" in flags:
        return "AMX"
    return "AVX-512" if "avx512f" in flags else "AVX2-only"


def greedy_rows(demo: dict, kind: str) -> list[tuple[str, str, str]]:
    """The greedy demo's targets on a CPU of ``kind``: ``(target, figure, verdict)``."""
    rows = {row["name"]: row for row in demo["rows"]}
    drafted = [row for name, row in rows.items() if name not in REFERENCE_ROWS]
    if not drafted or "generate" not in rows:
        return [("drafted greedy rows", "none in the file", "not measured")]
    best = max(drafted, key=lambda row: row["tokens_per_s"])
    generate = rows["generate"]["tokens_per_s"]
    out = []
    if "llama_cpp" in rows:
        ratio = best["tokens_per_s"] / rows["llama_cpp"]["tokens_per_s"]
        out.append(
            (
                "best drafted row >= plain llama.cpp (aim 1.5x)",
                f"{best['name']} {best['tokens_per_s']:.1f} tokens/s = {ratio:.2f}x llama.cpp",
                _verdict(ratio >= 1.0) + (" (aim met)" if ratio >= 1.5 else ""),
            )
        )
    else:
        out.append(("best drafted row >= plain llama.cpp", "no llama_cpp row", "not measured"))
    ratio, needed = best["tokens_per_s"] / generate, 1.5 if kind == "AVX2-only" else 3.0
    out.append(
        (
            f"best drafted row >= {needed:g}x eager generate() ({'AVX2-only' if needed < 3 else 'AMX'}'s target)",
            f"{ratio:.2f}x ({generate:.1f} tokens/s)",
            _verdict(ratio >= needed),
        )
    )
    slowest = min(drafted, key=lambda row: row["tokens_per_s"])
    out.append(
        (
            "no drafted row slower than generate()",
            f"slowest {slowest['name']} {slowest['tokens_per_s'] / generate:.2f}x",
            _verdict(slowest["tokens_per_s"] >= generate),
        )
    )
    if "lean" in rows:
        out.append(
            (
                "best drafted row vs plain decoding on the same step",
                f"{best['tokens_per_s'] / rows['lean']['tokens_per_s']:.2f}x lean",
                "reported",
            )
        )
    return out


def identity_rows(demo: dict) -> list[tuple[str, str, str]]:
    """float32: the drafted rows equal the lean step's plain greedy outputs (the demo compares
    them with it), and it equals generate()'s."""
    checked = [row for row in demo["rows"] if row["name"] == "lean" or row["name"] not in REFERENCE_ROWS]
    differing = [row["name"] for row in checked if not row["identical"]]
    figure = f"{len(checked) - len(differing)} of {len(checked)} rows identical (the drafted rows and lean)"
    return [("float32: every drafted greedy output = generate()'s", figure, _verdict(not differing))]


def step_rows(steps: dict, kind: str) -> list[tuple[str, str, str]]:
    """The one-token step and the 16-node ratio of every way measured; the targets are AMX's."""
    out = []
    for way, by_nodes in steps["ms"].items():
        one, sixteen = by_nodes.get("1"), by_nodes.get("16")
        if one is None or sixteen is None:
            continue
        met = one <= STEP_TARGET_MS and sixteen <= FLAT_TARGET * one
        out.append(
            (
                f"step: {way}",
                f"1 token {one:.1f} ms, 16 nodes {sixteen:.1f} ms ({sixteen / one:.2f}x)",
                (_verdict(met) if kind == "AMX" else "reported (targets are AMX's)"),
            )
        )
    return out


def sampling_rows(demo: dict) -> list[tuple[str, str, str]]:
    rows = {row["name"]: row for row in demo["rows"]}
    drafted = [row for name, row in rows.items() if name not in REFERENCE_ROWS]
    if "lean" not in rows or not drafted:
        return [("sampling rows", "no lean row or no drafted row", "not measured")]
    best = max(drafted, key=lambda row: row["tokens_per_s"])
    lean = rows["lean"]["tokens_per_s"]
    return [
        (
            "sampling: best drafted row vs plain sampling on the same step",
            f"{best['name']} {best['tokens_per_s']:.1f} tokens/s = {best['tokens_per_s'] / lean:.2f}x lean",
            "reported",
        )
    ]


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="what bench/cpu_session.sh wrote")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table (for bench/RESULTS.md)")
    args = parser.parse_args()
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")
    lscpu = (args.folder / "lscpu.txt").read_text() if (args.folder / "lscpu.txt").is_file() else ""
    kind = cpu_kind(lscpu) if lscpu else "unknown (no lscpu.txt)"
    targets: list[tuple[str, str, str]] = []
    for name, judge in (("demo.json", lambda demo: greedy_rows(demo, kind)), ("demo_fp32.json", identity_rows)):
        demo = _load(args.folder / name)
        targets += judge(demo) if demo else [(name, "missing", "not measured")]
    on_amx = _load(args.folder / "demo_amx.json")  # the greedy targets again, on the AMX kernel
    targets += [(f"AMX kernel: {t}", figure, v) for t, figure, v in greedy_rows(on_amx, kind)] if on_amx else []
    steps = _load(args.folder / "step_cost.json")
    targets += step_rows(steps, kind) if steps else [("step_cost.json", "missing", "not measured")]
    sampled = _load(args.folder / "demo_T07.json")
    targets += sampling_rows(sampled) if sampled else [("demo_T07.json", "missing", "not measured")]
    timings = args.folder / "timings.txt"
    lines = timings.read_text().splitlines() if timings.is_file() else []
    main_job = [line.split()[-1] for line in lines if line.startswith("main_job ")]
    if main_job:
        seconds = float(main_job[-1])
        targets.append(("main job under 180 s", f"{seconds:.0f} s", _verdict(seconds < 180)))
    else:
        targets.append(("main job under 180 s", "no timing", "not measured"))
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")), "?")
    if args.markdown:
        print(f"CPU: {model} ({kind})\n\n| target | figure | verdict |\n| --- | --- | --- |")
        for target in targets:
            print("| " + " | ".join(target) + " |")
    else:
        print(f"CPU: {model} ({kind})")
        for target, figure, verdict in targets:
            print(f"- {target}: {figure}: {verdict}")


if __name__ == "__main__":
    main()
