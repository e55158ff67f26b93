"""Energy and average power from NVML's energy counter over a tick-aligned window."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.errors import UserError
from ctune.measure import SamplingPlan
from ctune.measure.nvml_energy import power_limit_w
from ctune.measure.session import WorkerMeasurer
from ctune.records import Outcome

DATA = Path(__file__).parents[1] / "data" / "kernels"

pytestmark = [pytest.mark.gpu, pytest.mark.nvml]


def test_energy_and_power_within_limits(load, builder):
    spec = load(DATA / "faults.yaml")  # MODE 0: y = 2x, a streaming kernel
    problem = spec.problem("n64m")
    plan = SamplingPlan(rep_ms=20, min_samples=20, energy=True, energy_window_s=1.0)
    with WorkerMeasurer() as measurer:
        m = measurer.measure(spec, *builder(spec, problem), problem, plan)
    assert m.outcome is Outcome.OK, m.error
    limit = power_limit_w(0)
    print(
        f"energy {m.energy_j} J/call, {m.avg_power_w} W, window {m.energy_window_s} s, "
        f"{m.energy_launches} launches, limit {limit} W; {m.energy_method}"
    )
    assert m.energy_j is not None and m.energy_j > 0
    assert m.avg_power_w is not None and m.avg_power_w > 0
    if limit is not None:
        assert m.avg_power_w <= 1.1 * limit  # the 1 s average may overshoot the cap briefly
    assert m.energy_window_s is not None and m.energy_window_s >= 1.0
    assert m.energy_launches is not None and m.energy_launches > 0
    assert "tick-aligned" in m.energy_method
    # energy per call ~ power x time per call (order of magnitude against the timing)
    assert m.summary is not None
    assert 0.1 < m.energy_j / (m.avg_power_w * m.summary.p50_ms / 1e3) < 10


def test_microsecond_kernel_energy(load, builder):
    spec = load(DATA / "saxpy.yaml")
    problem = spec.problem("n1m")
    plan = SamplingPlan(rep_ms=5, min_samples=20, energy=True, energy_window_s=1.0)
    with WorkerMeasurer() as measurer:
        m = measurer.measure(spec, *builder(spec, problem), problem, plan)
    assert m.outcome is Outcome.OK, m.error
    assert m.energy_j is not None and m.energy_j > 0 and m.energy_window_s >= 1.0


def test_windows_under_one_second_are_refused(load, builder):
    spec = load(DATA / "saxpy.yaml")
    problem = spec.problem("n1m")
    plan = SamplingPlan(energy=True, energy_window_s=0.5)
    with WorkerMeasurer() as measurer, pytest.raises(UserError, match="at least 1 s"):
        measurer.measure(spec, *builder(spec, problem), problem, plan)
