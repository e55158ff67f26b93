"""Confirmation in proportion: rounds of fresh processes until the decision is settled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ctune.records import Build, Candidate, Measurement, Outcome, Trial
from ctune.search.confirm import confirm_in_proportion, min_processes
from ctune.search.report import pool


def _trial(name: str, value: float, number: int) -> tuple[Trial, Build]:
    cand = Candidate.of("k", {"X": name})
    build = Build(cand.key(), (), "nvcc", Outcome.OK, sass_sha256=name)
    return Trial(number, 0, cand, Outcome.OK, build, None, (value,), ()), build


class ScriptedProcesses:
    """NOT A GPU: each key's latency in ms, with 1% sample noise and a 0.3% process offset."""

    def __init__(self, true_ms: Mapping[str, float], fail: Sequence[str] = ()) -> None:
        self.true_ms = dict(true_ms)
        self.fail = set(fail)
        self.rng = np.random.default_rng(7)
        self.rounds: list[list[str]] = []

    def __call__(self, batch: Sequence[tuple[Trial, Build]]) -> dict[str, Measurement]:
        self.rounds.append([t.candidate.key() for t, _ in batch])
        offset = 1.0 + 0.003 * self.rng.standard_normal()
        out = {}
        for trial, _ in batch:
            key = trial.candidate.key()
            if key in self.fail:
                out[key] = Measurement(key, "p", Outcome.RUNTIME_FAULT)
                continue
            samples = self.true_ms[key] * offset * np.exp(0.01 * self.rng.standard_normal(80))
            out[key] = Measurement(key, "p", Outcome.OK, samples_ms=tuple(samples.tolist()))
        return out


def _median(build: Build, runs: Sequence[Measurement]) -> float | None:
    pooled = pool(runs)
    return None if pooled is None else float(np.median(pooled.samples_ms))


def _run(items: list[tuple[Trial, Build]], truth: dict[str, float], limit: int = 5, **kw):
    keys = [t.candidate.key() for t, _ in items]
    runner = ScriptedProcesses(
        {k: truth[t.candidate.as_dict()["X"]] for k, (t, _) in zip(keys, items, strict=True)}, **kw
    )
    runs, cost = confirm_in_proportion(
        items, keys[0], runner, _median, directions=("min",), limit=limit
    )
    return runs, cost, runner, keys


def test_a_clear_leader_needs_the_minimum_and_only_itself() -> None:
    items = [
        _trial("base", 1.0, 0),
        _trial("lead", 0.70, 1),
        _trial("b", 0.85, 2),
        _trial("c", 0.9, 3),
    ]
    runs, cost, runner, keys = _run(items, {"base": 1.0, "lead": 0.7, "b": 0.85, "c": 0.9})
    assert cost.stopped == "settled" and cost.processes == min_processes() == 3
    assert set(runs) == {keys[0], keys[1]} and cost.measurements == 6 and cost.members == 1
    assert all(sorted(r) == sorted(keys[:2]) for r in runner.rounds)


def test_no_difference_at_all_is_settled_too() -> None:
    items = [_trial("base", 1.0, 0), _trial("lead", 0.999, 1)]
    _, cost, _, _ = _run(items, {"base": 1.0, "lead": 1.0})
    assert cost.stopped == "settled" and cost.processes == 3


def test_an_undecided_comparison_goes_to_the_limit() -> None:
    # 1.4% apart: beyond half the 2% threshold, not beyond it
    items = [_trial("base", 1.0, 0), _trial("lead", 0.985, 1)]
    _, cost, runner, _ = _run(items, {"base": 1.0, "lead": 0.986}, limit=5)
    assert cost.stopped == "limit" and cost.processes == 5 == len(runner.rounds)


def test_a_close_runner_up_joins_and_must_be_told_apart() -> None:
    items = [_trial("base", 1.0, 0), _trial("lead", 0.700, 1), _trial("close", 0.705, 2)]
    runs, cost, runner, keys = _run(items, {"base": 1.0, "lead": 0.70, "close": 0.80})
    assert keys[2] in runs and cost.members == 2  # within 2% in the search: measured
    assert cost.stopped == "settled" and len(runs[keys[2]]) >= min_processes()
    # from the first round: it needs no process beyond the minimum the others need
    assert cost.processes == min_processes() and all(keys[2] in r for r in runner.rounds)


def test_a_runner_up_beyond_two_percent_waits_for_the_processes_threshold() -> None:
    items = [_trial("base", 1.0, 0), _trial("lead", 0.700, 1), _trial("far", 0.72, 2)]
    runs, cost, runner, keys = _run(items, {"base": 1.0, "lead": 0.70, "far": 0.80})
    assert keys[2] not in runner.rounds[0] and keys[2] not in runs  # 2.9% behind: not needed
    assert cost.stopped == "settled" and cost.processes == min_processes()


def test_a_leader_that_fails_again_makes_way_for_the_next() -> None:
    items = [_trial("base", 1.0, 0), _trial("lead", 0.7, 1), _trial("next", 0.8, 2)]
    keys = [t.candidate.key() for t, _ in items]
    runs, cost, _, _ = _run(items, {"base": 1.0, "lead": 0.7, "next": 0.8}, fail=[keys[1]])
    assert keys[2] in runs and cost.members == 2


def test_the_limit_is_a_limit() -> None:
    items = [_trial("base", 1.0, 0), _trial("lead", 0.7, 1)]
    runs, cost, runner, keys = _run(items, {"base": 1.0, "lead": 0.7}, limit=1)
    assert cost.processes == 1 == len(runner.rounds) and len(runs[keys[1]]) == 1


def test_a_search_reports_what_confirming_cost(search) -> None:
    result, measurer, _, _ = search(("p50",), budget=30, seed=1, journal_fsync=False)
    cost = result.confirmation
    assert cost is not None and cost.limit == 5 and cost.seconds >= 0
    assert cost.processes == result.confirm_processes and cost.measurements == len(
        measurer.remeasured
    )
    assert result.to_json()["confirmation"]["processes"] == cost.processes


def test_the_cost_names_each_rounds_wall_time() -> None:
    items = [_trial("base", 1.0, 0), _trial("lead", 0.7, 1)]
    keys = [t.candidate.key() for t, _ in items]
    runner = ScriptedProcesses({keys[0]: 1.0, keys[1]: 0.7})
    ticks = iter(range(100))  # the clock advances 1 s per reading

    _, cost = confirm_in_proportion(
        items,
        keys[0],
        runner,
        _median,
        directions=("min",),
        limit=5,
        clock=lambda: float(next(ticks)),
    )
    assert cost.round_seconds == (1.0,) * cost.processes
    assert cost.to_json()["round_seconds"] == [1.0] * cost.processes


def _stopped_during_round(items: list[tuple[Trial, Build]], at: int, limit: int) -> tuple:
    """Confirm ``items`` with a Ctrl-C (``stop`` turning true) during round ``at``."""
    keys = [t.candidate.key() for t, _ in items]
    runner = ScriptedProcesses({keys[0]: 1.0, keys[1]: 0.7})

    def stop() -> bool:
        return len(runner.rounds) >= at

    runs, cost = confirm_in_proportion(
        items, keys[0], runner, _median, directions=("min",), limit=limit, stop=stop
    )
    return runs, cost, runner


def test_a_ctrl_c_in_the_round_that_settles_or_ends_it_still_stops() -> None:
    """A stop asked during the last round (it settles the comparison, or reaches the limit)
    is not lost: the round counts, and the cost says interrupted."""
    items = [_trial("base", 1.0, 0), _trial("lead", 0.7, 1)]
    runs, cost, runner = _stopped_during_round(items, min_processes(), limit=5)  # settles
    assert cost.stopped == "interrupted" and cost.processes == len(runner.rounds) == 3
    assert all(len(r) == 3 for r in runs.values())
    _, cost, runner = _stopped_during_round(items, 2, limit=2)  # the limit
    assert cost.stopped == "interrupted" and cost.processes == len(runner.rounds) == 2
    _, cost, runner = _stopped_during_round(items, 1, limit=5)  # an earlier round
    assert cost.stopped == "interrupted" and cost.processes == len(runner.rounds) == 1
