"""The hang limit scales with a typical OK measurement, not the first (cold) one, and never
drops below twice the slowest OK one (a new problem pays the cold costs again)."""

from __future__ import annotations

from ctune.measure import SamplingPlan
from ctune.measure.plan import TypicalWall, hang_timeout_s


def limit(typical: TypicalWall) -> float:
    return hang_timeout_s(SamplingPlan(), typical.seconds, 10.0, typical.slowest)


def test_a_cold_first_measurement_does_not_set_the_hang_limit():
    typical = TypicalWall()
    typical.add(10.0)  # the first measurement in a fresh worker: CuPy compiles the reference
    assert limit(typical) == 200.0  # 20x it, as long as it is all there is
    for _ in range(6):
        typical.add(0.3)
    assert typical.seconds == 0.3
    assert typical.slowest == 10.0
    assert limit(typical) == 20.0  # twice the slowest OK one, not 20x the cold one


def test_the_floor_holds_for_fast_runs():
    typical = TypicalWall()
    for _ in range(5):
        typical.add(0.2)
    assert limit(typical) == 10.0


def test_typical_wall_keeps_the_recent_ones_and_a_seed_resets_it():
    typical = TypicalWall()
    assert typical.seconds is None and typical.slowest is None
    for wall in [1.0] * 30 + [2.0] * 25:
        typical.add(wall)
    assert typical.seconds == 2.0  # only the last 25 count
    typical.add(None)
    typical.add(0.0)
    assert typical.seconds == 2.0  # nothing measured adds nothing
    typical.seed(0.5)
    assert typical.seconds == 0.5 and typical.slowest == 0.5
    typical.seed(None)
    assert typical.seconds is None and typical.slowest is None
