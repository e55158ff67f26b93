"""The one scheduler in its two configurations: one measure slot (serial, measured in line)
and several (started, ``Measurer.start``, journaled in batch order).

On a simulated clock (``ctune.testing.slow_builds``) both must give the same trials and
verdicts and account compile wait and measure time the same way (docs/design.md, "The
scheduler", says what must be equal and why).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.objective import parse_objective_spec
from ctune.records import Candidate
from ctune.search.driver import SearchOptions, run_search
from ctune.search.journal import read
from ctune.search.result import SearchResult
from ctune.search.staged import StagedStrategy
from ctune.spec import KernelSpec
from ctune.testing.slow_builds import (
    FakeClock,
    SlowStandInCompiler,
    TimedStandInMeasurer,
    runtime_standin_spec,
)
from ctune.testing.standins import standin_spec


class TwoSlotMeasurer(TimedStandInMeasurer):
    """NOT A GPU: the timed stand-in offering two measure slots, so the scheduler starts
    its measurements (the base class's ``start``: measured when started)."""

    slots = 2


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    """Every gene compiled: no two candidates share a build."""
    return standin_spec(tmp_path / "kernel")


@pytest.fixture
def rt_spec(tmp_path: Path) -> KernelSpec:
    """Runtime genes too: candidates that differ only in them share a build."""
    return runtime_standin_spec(tmp_path / "kernel")


def _search(
    spec: KernelSpec,
    folder: Path,
    slots: int,
    *,
    compile_s: float,
    jobs: int,
    compile_s_of: Callable[[Candidate], float] | None = None,
    **options: Any,
) -> tuple[SearchResult, list[int]]:
    """A search on the simulated clock; also how many measurements started per slot count
    (the two-slot measurer must have been asked through ``start``)."""
    clock = FakeClock()
    kind = TwoSlotMeasurer if slots == 2 else TimedStandInMeasurer
    measurer = kind(clock, measure_s=1.0, samples=30)
    starts: list[int] = []
    original = measurer.start

    def counting_start(*args: Any, **kwargs: Any) -> Any:
        starts.append(1)
        return original(*args, **kwargs)

    measurer.start = counting_start  # type: ignore[method-assign]
    result = run_search(
        Settings(cache_dir=folder),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(
            **{
                "seed": 4,
                "budget": 24,
                "journal_fsync": False,
                "confirm_processes": 3,
                "fill": False,
                **options,
            }
        ),
        compiler=SlowStandInCompiler(
            spec, clock, compile_s=compile_s, jobs=jobs, compile_s_of=compile_s_of
        ),
        measurer=measurer,
        clock=clock,
    )
    return result, starts


def _trials(result: SearchResult) -> list[tuple[Any, ...]]:
    replay, _ = read(result.journal)
    return [
        (t.number, t.generation, t.candidate.key(), t.outcome.value, t.values)
        for t in replay.trials
    ]


def _journaled_at(result: SearchResult) -> list[float]:
    """When each trial was journaled, on the search's clock."""
    records = [json.loads(line) for line in result.journal.read_text().splitlines()]
    return [r["elapsed_s"] for r in records if r.get("kind") == "trial"]


def _verdicts(result: SearchResult) -> list[tuple[Any, ...]]:
    members = [result.baseline, *result.front] if result.baseline is not None else []
    return [
        (
            m.key,
            m.values,
            m.confirmed,
            m.significance.difference if m.significance is not None else None,
        )
        for m in members
    ]


def test_compile_bound_one_and_two_slots_account_alike(spec: KernelSpec, tmp_path: Path) -> None:
    """One build compiles at a time and each takes longer than a measurement: only one
    build is ever ready, so both configurations make the same schedule. Everything is
    equal: the journal (trial by trial, and when each was journaled), the verdicts, and
    the timers to the simulated second."""
    serial, serial_starts = _search(spec, tmp_path / "one", 1, compile_s=5.0, jobs=1)
    two, two_starts = _search(spec, tmp_path / "two", 2, compile_s=5.0, jobs=1)
    assert serial_starts == [] and len(two_starts) > 0  # in line vs started
    assert serial.evaluations == two.evaluations == 24
    assert _trials(two) == _trials(serial)
    assert _journaled_at(two) == _journaled_at(serial)
    assert _verdicts(two) == _verdicts(serial)
    s, t = serial.timing, two.timing
    # compile-bound: most of the run waits for builds; every measurement takes 1 s
    assert s.compile_wait_s > 0.5 * s.wall_s
    assert s.measure_s == pytest.approx(1.0 * serial.evaluations)
    assert (t.compile_wait_s, t.measure_s, t.wall_s) == pytest.approx(
        (s.compile_wait_s, s.measure_s, s.wall_s)
    )


@pytest.mark.parametrize("shared_builds", [False, True])
def test_measure_bound_one_and_two_slots_give_the_same_trials(
    spec: KernelSpec, rt_spec: KernelSpec, tmp_path: Path, shared_builds: bool
) -> None:
    """Builds are quicker than measurements, so several are ready at once: the two-slot
    configuration starts them together and journals them in batch order, the serial one
    measures the first ready in batch order. Same trials and verdicts; measure time is
    each measurement's time in flight, so it is the same sum, and the wall time splits
    into the same parts by the same rule."""
    spec = rt_spec if shared_builds else spec
    serial, _ = _search(spec, tmp_path / "one", 1, compile_s=0.25, jobs=2)
    two, _ = _search(spec, tmp_path / "two", 2, compile_s=0.25, jobs=2)
    assert _trials(two) == _trials(serial)
    assert _verdicts(two) == _verdicts(serial)
    assert serial.timing.measure_s == pytest.approx(1.0 * serial.evaluations)
    assert two.timing.measure_s == pytest.approx(serial.timing.measure_s)
    # the schedules differ (two slots take every ready build at once, then wait for the
    # next builds longer), but each simulated second is one of compile wait, measure or
    # confirm in both: nothing is counted twice or lost
    for timing in (serial.timing, two.timing):
        parts = timing.compile_wait_s + timing.measure_s + timing.confirm_s
        assert parts == pytest.approx(timing.wall_s), timing


def every_fourth_build_slow(slow_s: float) -> Callable[[Candidate], float]:
    """Build seconds by the order of the compiler's runs: the first of each four after the
    baseline takes ``slow_s``, the others 1 s (a generation's head among them)."""
    runs: list[Candidate] = []

    def seconds(cand: Candidate) -> float:
        runs.append(cand)
        return slow_s if len(runs) % 4 == 2 else 1.0

    return seconds


def _generation_ends(result: SearchResult) -> dict[int, float]:
    """When each generation's last trial was journaled, on the search's clock."""
    records = [json.loads(line) for line in result.journal.read_text().splitlines()]
    return {r["trial"]["generation"]: r["elapsed_s"] for r in records if r.get("kind") == "trial"}


@pytest.mark.parametrize("slots", [1, 2])
def test_a_slow_build_holds_up_neither_the_builds_done_meanwhile_nor_the_next(
    spec: KernelSpec, tmp_path: Path, slots: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two compile slots, generations of 7 with two builds taking 30 s, the first
    generation's head one of them: the builds that end meanwhile are measured and the
    rest of the generation is submitted while it compiles, so the two slow builds compile
    side by side (a generation of about 35 s), not one after the other (about 60 s)."""
    # no first generation built beside the baseline (test_prefetch_first_generation.py):
    # its head is the slow build, as a later generation's may be
    monkeypatch.setattr(StagedStrategy, "first_asks_ignore_values", lambda self: False)
    result, _ = _search(
        spec,
        tmp_path / "s",
        slots,
        compile_s=1.0,
        jobs=2,
        compile_s_of=every_fourth_build_slow(30.0),
    )
    trials = read(result.journal)[0].trials
    first_generation = [t for t in trials if t.generation == 1]
    assert [t.build.compile_s for t in first_generation].count(30.0) == 2
    assert trials[0].build.compile_s == 1.0  # the baseline: the slow head is the next build
    if slots == 1:  # journaled as measured: a quick build first
        assert first_generation[0].build.compile_s == 1.0
    ends = _generation_ends(result)
    spans = [ends[g] - ends[g - 1] for g in sorted(ends) if g > 0]
    assert len(spans) == 3 and max(spans) < 40.0, spans
