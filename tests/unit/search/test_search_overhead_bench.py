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
