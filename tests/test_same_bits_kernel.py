"""Of the kernels that give a step the same bits (the VNNI kernel and the AMX kernel), the default
model's step takes the one this machine's fastest drafting is predicted faster on
(draftlattice.default_model.fastest.fastest_same_bits_step); a kernel with no such twin, or
dense weights, is kept without measuring anything."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

import draftlattice.lean.fit as fit
import draftlattice.lean.lowbit as lowbit
from draftlattice import _core
from draftlattice.default_model import DefaultModel
from draftlattice.default_model.fastest import fastest_drafting, fastest_same_bits_step
from draftlattice.default_model.load import artifacts_dir
from draftlattice.lean.fit import CostCurve

SHIPPED = artifacts_dir() / "draft_budget.json"
STEEP = CostCurve((1, 2, 4, 8, 16, 32), (4.1, 4.3, 6.2, 7.9, 14.1, 25.9))  # the VNNI kernel on 2 Zen 4 cores
FLAT = CostCurve((1, 8, 16, 32), (4.3, 4.5, 4.8, 6.0))  # tiles: 16 rows for about one's price


@dataclass(frozen=True)
class _Step:
    kernel: str
    weights: str = "int4"


def _bundle(step) -> DefaultModel:
    return DefaultModel(None, None, None, None, None, Path("."), step)


@pytest.fixture
def two_kernels(monkeypatch):
    """A CPU with both kernels, each step's cost curve given by its kernel (none measured)."""
    curves = {"avx512-vnni": STEEP, "amx-int8": FLAT}
    timed = []

    def curve(step, cache_file=None):
        timed.append(step.kernel)
        return curves[step.kernel]

    monkeypatch.setattr(lowbit, "same_bits_kernels", lambda kernel: [kernel, *(k for k in curves if k != kernel)])
    monkeypatch.setattr(fit, "cached_cost_curve", curve)
    return curves, timed


def test_the_kernel_whose_fastest_drafting_is_predicted_faster_is_taken(two_kernels):
    curves, timed = two_kernels
    built = []

    def build(kernel):
        built.append(kernel)
        return _Step(kernel)

    step = fastest_same_bits_step(_bundle(_Step("avx512-vnni")), build, SHIPPED)
    assert step == _Step("amx-int8") and built == ["amx-int8"]
    flat = fastest_drafting(_bundle(step), SHIPPED, FLAT).predicted
    assert flat > fastest_drafting(_bundle(_Step("avx512-vnni")), SHIPPED, STEEP).predicted
    # the other way round, the first kernel stays
    curves["avx512-vnni"], curves["amx-int8"] = FLAT, STEEP
    assert fastest_same_bits_step(_bundle(_Step("avx512-vnni")), build, SHIPPED) == _Step("avx512-vnni")
    assert set(timed) == {"avx512-vnni", "amx-int8"}


def test_without_a_gains_table_plain_decodings_cost_decides(two_kernels, tmp_path):
    curves, _ = two_kernels
    curves["amx-int8"] = CostCurve((1, 8), (3.9, 30.0))  # cheaper for one token, dear for eight
    step = fastest_same_bits_step(_bundle(_Step("avx512-vnni")), _Step, tmp_path / "missing.json")
    assert step == _Step("amx-int8")


def test_a_kernel_without_a_twin_and_dense_weights_are_kept_unmeasured(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("nothing is built or measured")

    monkeypatch.setattr(fit, "cached_cost_curve", refuse)
    for step in (_Step("avx2-int8"), _Step("avx512-bf16"), _Step("avx512-vnni", "dense")):
        if step.kernel == "avx512-vnni":
            monkeypatch.setattr(lowbit, "same_bits_kernels", lambda kernel: [kernel, "amx-int8"])
        assert fastest_same_bits_step(_bundle(step), refuse, SHIPPED) is step
    assert fastest_same_bits_step(_bundle(None), refuse, SHIPPED) is None


def test_only_the_vnni_and_amx_kernels_are_twins_and_only_where_the_cpu_runs_both():
    assert lowbit.same_bits_kernels("avx2-int8") == ["avx2-int8"]  # its fused steps attend in plain C++
    assert lowbit.same_bits_kernels("avx512-bf16") == ["avx512-bf16"]
    here = _core.lowbit_kernels()
    for kernel in [k for k in ("avx512-vnni", "amx-int8") if k in here]:  # a step's kernel runs here
        twins = lowbit.same_bits_kernels(kernel)
        assert twins[0] == kernel and all(k in here for k in twins[1:])
        assert len(twins) == (2 if {"avx512-vnni", "amx-int8"} <= set(here) else 1)
