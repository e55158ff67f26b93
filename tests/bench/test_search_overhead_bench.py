"""bench/search_overhead.py's fixed costs and their bound (the runs themselves need a GPU)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from ctune.config import Settings
from ctune.objective import parse_objective_spec
from ctune.search.driver import SearchOptions, run_search
from ctune.testing.standins import StandInCompiler, StandInMeasurer, standin_spec


@pytest.fixture
def bench(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("search_overhead")


def _fixed(bench: ModuleType, tmp_path: Path, confirm: int) -> tuple[dict[str, float], float]:
    """A stand-in search's fixed seconds as the benchmark takes them, and its wall."""
    spec = standin_spec(tmp_path / f"kernel{confirm}")
    costs = bench.FixedCosts()
    result = run_search(
        Settings(cache_dir=tmp_path / f"cache{confirm}"),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(budget=12, seed=3, confirm_processes=confirm, journal_fsync=False),
        compiler=StandInCompiler(spec),
        measurer=StandInMeasurer(seed=3),
        on_event=costs.on_event,
    )
    assert result.evaluations == 12
    wall = time.monotonic() - costs.start
    return costs.seconds(wall), wall


def test_fixed_costs_are_the_start_and_the_confirmation(bench: ModuleType, tmp_path: Path) -> None:
    confirmed, wall = _fixed(bench, tmp_path, confirm=3)
    assert confirmed["start_s"] is not None and 0 <= confirmed["start_s"] < wall
    assert confirmed["confirmation_s"] is not None and 0 < confirmed["confirmation_s"] < wall
    assert confirmed["total_s"] == pytest.approx(confirmed["start_s"] + confirmed["confirmation_s"])
    unconfirmed, _ = _fixed(bench, tmp_path, confirm=0)
    assert unconfirmed["confirmation_s"] is None
    assert unconfirmed["total_s"] == unconfirmed["start_s"]


def test_the_bound_is_the_fixed_seconds_alone_per_candidate(bench: ModuleType) -> None:
    ours = {"fixed_s": {"total_s": 5.4}, "candidates": 36}
    assert bench.ratio_bound(ours, {"s_per_candidate": 0.15}) == pytest.approx(1.0)
    assert (
        bench.ratio_bound({**ours, "fixed_s": {"total_s": None}}, {"s_per_candidate": 0.15}) is None
    )


def test_the_summary_is_the_median_run_by_ratio_with_the_range_and_every_run(
    bench: ModuleType,
) -> None:
    def run(ratio: float) -> dict[str, object]:
        return {"ratio": ratio, "ctune_s_per_candidate": ratio / 10, "ctune": {"wall_s": ratio}}

    runs = [run(0.9), run(0.7), run(1.2)]
    got = bench.summary(runs)
    assert got["ratio"] == 0.9 and got["ctune_s_per_candidate"] == pytest.approx(0.09)
    assert got["ratio_range"] == [0.7, 1.2] and got["runs"] == runs
    assert "ctune" not in got  # each run's details stay in its own entry
    assert bench.summary([run(0.8), run(0.6)])["ratio"] == 0.6  # an even count: the lower
