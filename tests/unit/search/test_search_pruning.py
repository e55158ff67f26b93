"""Pruning and the search phase's plan: the threshold rule, the screen, the lighter
sampling budget, and the search's use of them."""

from __future__ import annotations

import dataclasses
import math

import pytest

from ctune.errors import UserError
from ctune.measure import SamplingPlan
from ctune.measure.plan import (
    PRUNE_MIN_SAMPLES,
    chunk_size,
    prunes,
    quantile_min_samples,
    sample_count,
    screen_size,
    screen_spin_ms,
    warmup_spin_ms,
)
from ctune.objective import parse_objective_spec
from ctune.objective.terms import TermContext
from ctune.records import Candidate, Measurement, Outcome, Trial
from ctune.search.journal import read
from ctune.search.pruning import (
    DEFAULT_PRUNE_MARGIN,
    SEARCH_MIN_SAMPLES,
    SEARCH_WARMUP_MS,
    parse_prune_margin,
    parse_search_rep,
    prune_threshold_ms,
    search_phase_plan,
)
from ctune.spec import KernelSpec
from ctune.testing.standins import StandInMeasurer, summarize_samples


def _leader(samples: list[float]) -> Trial:
    m = Measurement(
        "k", "p", Outcome.OK, samples_ms=tuple(samples), summary=summarize_samples(samples)
    )
    return Trial(0, 0, Candidate("k", ()), Outcome.OK, None, m, (1.0,), ())


CTX = TermContext({"N": 1 << 20}, {"flops": 2e9})
SAMPLES = [1.0] * 95 + [3.0] * 5  # median 1.0 ms, p99 3.0 ms: a heavy tail


def _threshold(objective: list[str], margin: float | None = 0.25) -> float | None:
    spec = parse_objective_spec(objective, [], {"flops": None})  # type: ignore[dict-item]
    return prune_threshold_ms(spec, _leader(SAMPLES), margin, CTX)


def test_threshold_is_the_leaders_own_statistic_plus_the_margin() -> None:
    assert _threshold(["p50"]) == pytest.approx(1.25)
    # a p99 search holds a candidate's median to the leader's p99: its p99 is at least its
    # median, so nothing that could lead is pruned even when the leader has a heavy tail
    p99 = _threshold(["p99"])
    assert p99 is not None and p99 > 3.0 * 1.2
    assert _threshold(["tflops"]) == pytest.approx(1.25)  # throughput: from the median


def test_no_threshold_where_a_slow_candidate_may_still_matter() -> None:
    assert _threshold(["p50"], margin=None) is None
    assert _threshold(["p50", "energy"]) is None  # several objectives: a front, not a leader
    assert _threshold(["0.5*p50 + 0.5*p99"]) is None
    assert _threshold(["regs"]) is None
    spec = parse_objective_spec(["p50"], [], {})
    assert prune_threshold_ms(spec, None, 0.25, CTX) is None  # no leader yet


def test_a_screen_is_short_and_its_spin_covers_the_hosts_enqueue() -> None:
    plan = SamplingPlan()
    pruning = dataclasses.replace(plan, prune_above_ms=1.0)
    assert screen_size(0.2) == 25  # 5 ms of samples
    assert screen_size(5.0) == PRUNE_MIN_SAMPLES  # never fewer than 10
    assert screen_size(0.001) == 100  # never more than a full chunk
    # a full chunk of a 20 ms kernel is 5 samples: the screen still takes the 10 that
    # prunes() needs, else such a kernel could never be pruned
    assert chunk_size(20.0) < PRUNE_MIN_SAMPLES
    assert screen_size(20.0) == PRUNE_MIN_SAMPLES
    assert prunes([20.0] * screen_size(20.0), pruning)
    assert not prunes([2.0] * 9, pruning)  # too few to decide
    assert prunes([2.0] * 10, pruning)
    assert not prunes([0.9] * 10, pruning) and not prunes([2.0] * 10, plan)
    # a sample enqueues a flush, two events and the launch: four launches of host time
    assert screen_spin_ms(25, 0.01) == warmup_spin_ms(100, 0.01) > warmup_spin_ms(25, 0.01)


def test_the_search_phase_samples_less_only_when_confirmation_re_measures() -> None:
    plan = SamplingPlan()
    lighter = search_phase_plan(plan, 0.5, 25.0, confirms=True)
    assert lighter.prune_above_ms == 0.5 and lighter.rep_ms == 25.0
    assert lighter.min_samples == SEARCH_MIN_SAMPLES < plan.min_samples
    # a candidate the screen just ran needs no protocol warm-up (still until batches agree)
    assert lighter.warmup_ms == SEARCH_WARMUP_MS < plan.warmup_ms
    # the quantile's floor is not the plan's: p99 of a 0.2 ms kernel still takes 200 samples
    p99 = dataclasses.replace(plan, quantile=0.99)
    count = sample_count(0.3, 0.2, search_phase_plan(p99, 0.5, 25.0, confirms=True))
    assert count.n == quantile_min_samples(0.99, 0.2) == 200
    assert sample_count(0.3, 0.2, lighter).n == max(SEARCH_MIN_SAMPLES, math.ceil(25.0 / 0.3))
    few = dataclasses.replace(plan, min_samples=10)  # a plan asking fewer keeps its own
    assert search_phase_plan(few, 0.5, 25.0, confirms=True).min_samples == 10
    reported = search_phase_plan(plan, 0.5, 25.0, confirms=False)
    assert reported.rep_ms == plan.rep_ms and reported.prune_above_ms == 0.5
    assert reported.min_samples == plan.min_samples and reported.warmup_ms == plan.warmup_ms
    assert search_phase_plan(plan, None, None, confirms=True) == plan
    assert search_phase_plan(plan, None, 500.0, confirms=True).rep_ms == plan.rep_ms  # never more
    assert parse_search_rep("25") == 25.0 and parse_search_rep("full") is None
    for bad in ("0", "-3", "fast"):
        with pytest.raises(UserError, match="--search-rep-ms"):
            parse_search_rep(bad)


def test_prune_margin_option() -> None:
    assert parse_prune_margin("25%") == pytest.approx(0.25)
    assert parse_prune_margin("1.5") == pytest.approx(1.5)
    assert parse_prune_margin("off") is None
    for bad in ("0%", "-5%", "fast"):
        with pytest.raises(UserError, match="--prune-margin"):
            parse_prune_margin(bad)


def test_search_prunes_slow_candidates_but_never_the_baseline_or_the_winner(
    search, spec: KernelSpec
) -> None:
    result, _measurer, _, _ = search(
        measurer=StandInMeasurer(samples=200, wrong_every=None, fault_corner=None),
        budget=40,
        seed=3,
        journal_fsync=False,
    )
    replay, _ = read(result.journal)
    measured = [t for t in replay.trials if t.measurement is not None]
    pruned = [t for t in measured if t.measurement.pruned]  # type: ignore[union-attr]
    assert pruned, "a 40-candidate search on the stand-in has clearly slower candidates"
    assert all(len(t.measurement.samples_ms) == PRUNE_MIN_SAMPLES for t in pruned)  # type: ignore[union-attr]
    assert not measured[0].measurement.pruned  # type: ignore[union-attr]  # the baseline
    assert result.front and not any(m.trial.measurement.pruned for m in result.front)  # type: ignore[union-attr]
    # each pruned one was, on its own short measurement, above the best found by the margin
    best = min(t.values[0] for t in measured if t.values)
    assert all(t.values[0] > (1 + DEFAULT_PRUNE_MARGIN) * best for t in pruned)


def test_no_pruning_when_switched_off_or_with_several_objectives(search) -> None:
    for options in ({"prune_margin": None}, {"objectives": ("p50", "energy")}):
        result, _, _, _ = search(
            measurer=StandInMeasurer(samples=200, wrong_every=None, fault_corner=None),
            budget=30,
            seed=3,
            journal_fsync=False,
            **options,
        )
        replay, _ = read(result.journal)
        assert not any(t.measurement and t.measurement.pruned for t in replay.trials)


class _PlanRecorder(StandInMeasurer):
    """A stand-in that records the plan of each measurement, each prestart asked for and
    each set-up asked for ahead (candidate key, problem, plan)."""

    def __init__(self) -> None:
        super().__init__(samples=200, wrong_every=None, fault_corner=None)
        self.plans: list[SamplingPlan] = []
        self.prestarts: list[tuple[int, bool]] = []
        self.set_ups: list[tuple[str, str, SamplingPlan]] = []
        self.problems: list[str] = []

    def measure(self, spec, candidate, build, problem, plan):  # type: ignore[no-untyped-def]
        self.plans.append(plan)
        self.problems.append(problem.name)
        return super().measure(spec, candidate, build, problem, plan)

    def prestart(self, count: int, wait: bool = True) -> None:
        self.prestarts.append((count, wait))

    def set_up_ahead(self, spec, candidate, problem, plan):  # type: ignore[no-untyped-def]
        self.set_ups.append((candidate.key(), problem.name, plan))


def test_the_search_samples_lighter_where_confirmation_measures_by_the_protocol(
    search,
) -> None:
    recorder = _PlanRecorder()
    search(measurer=recorder, budget=20, seed=1, journal_fsync=False)
    baseline, *rest = recorder.plans
    # the baseline too: confirmation re-measures it by the protocol, as it does the leader
    assert baseline.rep_ms == 25.0 and baseline.prune_above_ms is None
    assert rest and all(p.rep_ms == 25.0 for p in rest)
    # the worker and the three confirmation rounds start together, before anything runs,
    # each asked to set up the baseline's problem (what a set-up reads of a plan: the
    # check and the L2 policy) as soon as it is up
    assert recorder.prestarts[0] == (4, False)
    assert len(recorder.set_ups) == 1
    key, problem, plan = recorder.set_ups[0]
    assert key == recorder.calls[0] and problem == recorder.problems[0]
    assert (plan.check, plan.l2_policy) == (baseline.check, baseline.l2_policy)

    reported = _PlanRecorder()
    search(measurer=reported, budget=20, seed=1, journal_fsync=False, confirm_processes=0)
    assert all(p.rep_ms == SamplingPlan().rep_ms for p in reported.plans)
    assert reported.prestarts[0] == (1, False)  # no confirmation: no spares


def test_the_workers_start_before_the_device_is_probed(search, monkeypatch) -> None:
    import ctune.search.session as session

    order: list[str] = []
    probe = session.device_limits

    def limits(*args, **kwargs):
        order.append("device limits")
        return probe(*args, **kwargs)

    class Recorder(_PlanRecorder):
        def prestart(self, count: int, wait: bool = True) -> None:
            order.append("prestart")
            super().prestart(count, wait)

    monkeypatch.setattr(session, "device_limits", limits)
    search(measurer=Recorder(), budget=4, seed=1, journal_fsync=False)
    # a worker's start (~2 s with its siblings) overlaps the probe and the baseline's compile
    assert order[:2] == ["prestart", "device limits"]


def test_the_fingerprints_are_made_beside_the_search_not_after_its_baseline(
    search, monkeypatch
) -> None:
    """The journal's and the artifact's fingerprints (the real one scans the source's includes
    with nvcc) are computed in a thread from the run's start: the baseline's measurement is
    not followed by that wait, and the artifact records what the thread computed."""
    import threading

    import ctune.search.driver as driver

    made = driver._fingerprint
    threads: list[str] = []

    def fingerprint(*args, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return made(*args, **kwargs)

    monkeypatch.setattr(driver, "_fingerprint", fingerprint)
    result, _, _, _ = search(budget=6, seed=1, journal_fsync=False, write_result=False)
    assert len(threads) == 2 and all(t.startswith("ctune-fingerprint") for t in threads)
    assert result.record is not None and result.record.fingerprint["gpu_name"]


def test_the_valid_count_is_made_beside_the_search_not_after_its_baseline(
    search, monkeypatch
) -> None:
    """Where the count is estimated by sampling it takes seconds; it is computed in a thread
    from the run's start, so the first generation is not asked for only after it, and the
    start still announces it."""
    import threading

    from ctune.search.events import SearchStarted
    from ctune.spec.space.params import Space

    counted = Space.count_valid
    threads: list[str] = []

    def count_valid(self, dims, limit=500_000):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return counted(self, dims, limit)

    monkeypatch.setattr(Space, "count_valid", count_valid)
    _, _, _, events = search(budget=4, seed=1, journal_fsync=False, write_result=False)
    assert threads and all(t.startswith("ctune-count") for t in threads)
    (event,) = [e for e in events if isinstance(e, SearchStarted)]
    assert event.valid_candidates > 0
