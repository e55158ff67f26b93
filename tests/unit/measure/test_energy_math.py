"""The pure parts of the NVML energy plan."""

from __future__ import annotations

import pytest

from ctune.measure import nvml_energy as E


def test_energy_figures():
    # 700 J over a 1.0 s window, 0.25 ms per launch: 700 W, 0.175 J per call, 4000 launches
    energy_j, power_w, launches = E.energy_figures(700_000.0, 1.0, 0.25)
    assert power_w == pytest.approx(700.0)
    assert energy_j == pytest.approx(0.175)
    assert launches == 4000


def test_energy_figures_refuse_nonsense():
    with pytest.raises(ValueError):
        E.energy_figures(1.0, 0.0, 1.0)
    with pytest.raises(ValueError):
        E.energy_figures(1.0, 1.0, 0.0)


def test_batches_and_queue_depth():
    assert E.batch_size(0.005) == E.BATCH_MAX
    assert E.batch_size(1.0) == 5
    assert E.batch_size(50.0) == 1
    assert E.queue_depth(250, 0.005) == 40  # 50 ms of work queued
    assert E.queue_depth(1, 100.0) == 2


def test_nvml_available_never_raises():
    assert E.nvml_available(0) in (True, False)
    assert E.power_limit_w(0) is None or E.power_limit_w(0) > 0
