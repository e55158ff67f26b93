"""What the constraints did: the report's numbers, and no pin when the default build wins."""

from __future__ import annotations

from typing import Any

from ctune.objective.pareto import dominates, minimized
from ctune.search.journal import read
from ctune.testing.standins import DefaultWinsMeasurer


def test_only_builds_the_default_dominates_end_inconclusive_with_nothing_pinned(
    search: Any,
) -> None:
    result, *_ = search(("p99", "energy"), ("power<=480W",), measurer=DefaultWinsMeasurer(), seed=1)
    f = result.feasibility
    assert f is not None and not f.baseline_feasible
    assert result.front and f.dominated and result.inconclusive
    assert result.pinned is None  # a slower, hungrier build is never pinned
    base = result.baseline
    assert base is not None
    assert all(dominates(base.values, m.values) for m in result.front)  # both minimised
    assert result.to_json()["verdict"] == "inconclusive"


def test_report_counts_and_range_match_the_journal(search: Any) -> None:
    result, *_ = search(("p99", "energy"), ("power<=480W",), measurer=DefaultWinsMeasurer(), seed=1)
    f = result.feasibility
    assert f is not None
    replay, _ = read(result.journal)
    scored = [t for t in replay.trials if t.outcome.is_ok and t.values is not None]
    powers = [t.measurement.avg_power_w for t in scored if t.measurement is not None]
    (c,) = f.constraints
    assert (c.text, c.term, c.unit) == ("power<=480W", "power", "W")
    assert c.measured == len(scored) == f.evaluated
    assert c.broken == sum(t.violations[0] > 0 for t in scored) == f.infeasible >= 1
    assert (c.low, c.high) == (min(powers), max(powers))
    assert c.baseline is not None and c.baseline > 480 and not c.baseline_ok
    # relaxing admits the best p99 the cap ruled out: the default build, at its power
    assert c.relax is not None
    best_ruled_out = min(
        (t for t in scored if t.violations[0] > 0),
        key=lambda t: t.values[0],  # type: ignore[index]
    )
    assert c.relax.key == best_ruled_out.candidate.key()
    assert c.relax.bound == best_ruled_out.measurement.avg_power_w  # type: ignore[union-attr]
    assert c.relax.admits == c.broken  # one constraint: everything it broke, up to that bound


def test_a_member_better_on_one_objective_is_still_pinned(search: Any) -> None:
    # the stand-in's energy optima differ from its latency optima: a trade-off exists
    result, *_ = search(("p99", "energy"), ("power<=400W",), seed=2, budget=30)
    f = result.feasibility
    assert f is not None and not f.baseline_feasible and f.notable
    assert not f.dominated and not result.inconclusive and result.pinned is not None


def test_no_constraints_no_report(search: Any) -> None:
    result, *_ = search(("p50",), seed=0, budget=12)
    f = result.feasibility
    assert f is not None and not f.constraints and not f.notable and not f.inconclusive
    assert result.pinned is not None


def test_nothing_feasible_is_inconclusive(search: Any) -> None:
    result, *_ = search(("p50",), ("p50<=0.001ms",), seed=0, budget=12)
    f = result.feasibility
    assert f is not None and f.empty and result.inconclusive and result.pinned is None
    assert f.constraints[0].broken == f.evaluated


def test_dominates_needs_one_strict_improvement() -> None:
    assert dominates((1.0, 2.0), (1.0, 3.0))
    assert not dominates((1.0, 3.0), (1.0, 3.0))
    assert not dominates((1.0, 4.0), (2.0, 3.0))
    mixed = ("max", "min")
    assert dominates(minimized((5.0, 1.0), mixed), minimized((4.0, 1.0), mixed))
    assert not dominates(minimized((4.0, 1.0), mixed), minimized((5.0, 1.0), mixed))
