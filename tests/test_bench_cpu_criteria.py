"""bench/cpu_criteria.py judges a CPU session's files against issue 37's targets: each target's
figure and verdict, AMX's step targets only on an AMX CPU, the generate() ratio the CPU kind asks
for, and missing files reported as not measured (no model: the files are written here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AMX = "Model name: Intel(R) Xeon(R) Platinum 8480C\nFlags: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
AVX2 = "Model name: AMD EPYC 7B13\nFlags: fpu avx2 fma f16c\n"


def _row(name: str, tokens_per_s: float, identical=True) -> dict:
    return {"name": name, "tokens_per_s": tokens_per_s, "identical": identical}


def _session(folder: Path, lscpu: str, demo_rows: list[dict], fp32_identical=(True, True), steps=None) -> Path:
    folder.mkdir()
    (folder / "lscpu.txt").write_text(lscpu)
    (folder / "demo.json").write_text(json.dumps({"rows": demo_rows}))
    fp32 = [_row("generate", 20.0), _row("lean", 22.0, fp32_identical[0]), _row("lookup", 30.0, fp32_identical[1])]
    (folder / "demo_fp32.json").write_text(json.dumps({"rows": fp32}))
    (folder / "step_cost.json").write_text(json.dumps({"ms": steps or {"lean int4": {"1": 4.0, "16": 13.0}}}))
    (folder / "timings.txt").write_text("main_job 65\n")
    return folder


def _verdicts(folder: Path) -> dict[str, str]:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "cpu_criteria.py"), str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = run.stdout.splitlines()
    assert lines[0].startswith("CPU: ")
    verdicts = {}
    for line in lines[1:]:
        target, _, verdict = line[2:].rpartition(": ")
        verdicts[target] = verdict
    return {"cpu": lines[0], **verdicts}


def _of(verdicts: dict[str, str], start: str) -> str:
    """The verdict of the one target whose line starts with ``start``."""
    (verdict,) = [verdict for target, verdict in verdicts.items() if target.startswith(start)]
    return verdict


GREEDY = [
    _row("generate", 30.0),
    _row("llama_cpp", 80.0),
    _row("lean", 90.0),
    _row("lookup", 130.0),
    _row("ngram", 95.0),
]


def test_an_amx_cpu_judged_by_its_targets(tmp_path):
    steps = {"lean bf16": {"1": 20.0, "16": 24.0}, "lean int4": {"1": 4.0, "16": 13.0}}
    verdicts = _verdicts(_session(tmp_path / "amx", AMX, GREEDY, steps=steps))
    assert verdicts["cpu"] == "CPU: Intel(R) Xeon(R) Platinum 8480C (AMX)"
    assert _of(verdicts, "best drafted row >= plain llama.cpp") == "met (aim met)"  # 1.63x
    assert _of(verdicts, "best drafted row >= 3x eager") == "met"
    assert _of(verdicts, "no drafted row slower than generate()") == "met"
    assert _of(verdicts, "step: lean bf16") == "met"  # 20 ms, 1.2x
    assert _of(verdicts, "step: lean int4") == "NOT met"  # 3.25x
    assert _of(verdicts, "float32") == "met"
    assert _of(verdicts, "main job") == "met"


def test_the_main_job_on_the_amx_kernel_is_judged_too(tmp_path):
    folder = _session(tmp_path / "amx", AMX, GREEDY)
    rows = [_row("generate", 30.0), _row("llama_cpp", 80.0), _row("lean", 100.0), _row("lookup", 60.0)]
    (folder / "demo_amx.json").write_text(json.dumps({"rows": rows}))
    verdicts = _verdicts(folder)
    assert _of(verdicts, "AMX kernel: best drafted row >= plain llama.cpp") == "NOT met"  # 0.75x
    assert _of(verdicts, "best drafted row >= plain llama.cpp") == "met (aim met)"  # the default kernel's
    assert not any(target.startswith("AMX kernel") for target in _verdicts(_session(tmp_path / "b", AMX, GREEDY)))


def test_an_avx2_cpu_is_judged_by_its_own_targets(tmp_path):
    rows = [_row("generate", 30.0), _row("llama_cpp", 80.0), _row("lookup", 60.0), _row("heads", 25.0)]
    verdicts = _verdicts(_session(tmp_path / "avx2", AVX2, rows, fp32_identical=(False, True)))
    assert verdicts["cpu"].endswith("(AVX2-only)")
    assert _of(verdicts, "best drafted row >= plain llama.cpp") == "NOT met"
    assert _of(verdicts, "best drafted row >= 1.5x eager") == "met"  # 2x
    assert _of(verdicts, "no drafted row slower") == "NOT met"  # heads
    assert _of(verdicts, "step: lean int4") == "reported (targets are AMX's)"
    assert _of(verdicts, "float32") == "NOT met"  # the lean step's own greedy differed


def test_missing_files_are_not_measured_rather_than_failed(tmp_path):
    folder = _session(tmp_path / "part", AVX2, GREEDY)
    for name in ("demo_fp32.json", "step_cost.json", "timings.txt"):
        (folder / name).unlink()
    verdicts = _verdicts(folder)
    assert sum(verdict == "not measured" for verdict in verdicts.values()) == 4  # and no demo_T07.json


def test_not_a_folder_is_refused(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "cpu_criteria.py"), str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "is not a folder" in run.stderr


@pytest.mark.parametrize("lscpu, kind", [(AMX, "AMX"), (AVX2, "AVX2-only"), ("Flags: avx2 avx512f\n", "AVX-512")])
def test_cpu_kind_from_lscpu(lscpu, kind):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from cpu_criteria import cpu_kind
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert cpu_kind(lscpu) == kind
