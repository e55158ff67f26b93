"""bench/vendor_rounds.py: the vendor-over-ctune ratio's confidence interval decides."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest


def test_the_interval_says_faster_slower_or_the_same(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("vendor_rounds")
    faster = bench.ratio_summary([1.05, 1.04, 1.06, 1.05])
    assert faster["low"] > 1 and faster["ctune"] == "faster"
    assert faster["geomean"] == pytest.approx(1.05, abs=0.002)
    slower = bench.ratio_summary([0.95, 0.94, 0.96, 0.95])
    assert slower["high"] < 1 and slower["ctune"] == "slower"
    noisy = bench.ratio_summary([0.97, 1.02, 0.99, 1.01, 0.98])
    assert noisy["low"] < 1 < noisy["high"] and noisy["ctune"] == "same (1.0 inside)"
    # a ratio and its inverse: the geometric mean is symmetric about 1
    assert bench.ratio_summary([2.0, 0.5])["geomean"] == pytest.approx(1.0)
    assert bench.ratio_summary([1.1])["low"] is None  # one round has no interval
