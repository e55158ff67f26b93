"""CUDA-event timing through the worker, on saxpy: quantiles ordered, counts honoured, L2 flush
used in cold mode, device named, p99 sample floor for a microsecond kernel, re-measurement."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.evidence.identity import gpu_label
from ctune.measure import SamplingPlan
from ctune.measure.session import WorkerMeasurer, measure_in_fresh_processes
from ctune.records import Outcome

DATA = Path(__file__).parents[1] / "data" / "kernels"

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def saxpy(load):
    return load(DATA / "saxpy.yaml")


@pytest.fixture
def measurer():
    with WorkerMeasurer() as m:
        yield m


def test_quantiles_ordered_and_device_named(saxpy, builder, measurer):
    problem = saxpy.problem("n1m")
    plan = SamplingPlan(rep_ms=20, min_samples=200, timing="events")
    m = measurer.measure(saxpy, *builder(saxpy, problem), problem, plan)
    assert m.outcome is Outcome.OK, m.error
    s = m.summary
    assert s is not None and s.n == len(m.samples_ms)
    assert 0 < s.min_ms <= s.p50_ms <= s.p95_ms <= s.p99_ms <= s.max_ms
    for est, ci in ((s.p50_ms, s.p50_ci_ms), (s.p95_ms, s.p95_ci_ms), (s.p99_ms, s.p99_ci_ms)):
        assert ci[0] <= est <= ci[1]
    assert len(m.samples_ms) + m.excluded_samples >= 200
    assert m.n_warmup > 1 and m.timing_method == "events"
    assert m.device is not None and m.device.name and m.device.sm.startswith("sm_")
    assert m.device.uuid and m.device.l2_bytes > 0 and m.device.sm_count > 0
    assert m.device == measurer.device_info()
    assert m.rel_l2_error is not None and m.rel_l2_error <= 1e-6
    assert m.sampling_note.startswith("n=")
    print(
        gpu_label(m.device),
        f"p50 {s.p50_ms * 1e3:.2f} us, p99 {s.p99_ms * 1e3:.2f} us,",
        f"clock {m.sm_clock_mhz} MHz, note: {m.sampling_note}",
    )


def test_sample_count_honoured(saxpy, builder, measurer):
    problem = saxpy.problem("n1m")
    plan = SamplingPlan(rep_ms=1, min_samples=300, max_samples=300)
    m = measurer.measure(saxpy, *builder(saxpy, problem), problem, plan)
    assert m.outcome is Outcome.OK, m.error
    assert len(m.samples_ms) + m.excluded_samples == 300


def test_cold_flushes_l2_and_hot_does_not(saxpy, builder, measurer):
    problem = saxpy.problem("n1m")
    candidate, build = builder(saxpy, problem)
    cold = measurer.measure(
        saxpy, candidate, build, problem, SamplingPlan(l2_policy="cold", rep_ms=5)
    )
    hot = measurer.measure(
        saxpy, candidate, build, problem, SamplingPlan(l2_policy="hot", rep_ms=5)
    )
    assert cold.outcome is Outcome.OK and hot.outcome is Outcome.OK
    assert cold.device is not None
    assert cold.l2_policy == "cold" and cold.l2_flush_bytes >= 2 * cold.device.l2_bytes
    assert hot.l2_policy == "hot" and hot.l2_flush_bytes == 0


def test_p99_needs_a_thousand_samples_on_a_microsecond_kernel(saxpy, builder, measurer):
    problem = saxpy.problem("n1m")
    plan = SamplingPlan(rep_ms=10, min_samples=100, quantile=0.99)
    m = measurer.measure(saxpy, *builder(saxpy, problem), problem, plan)
    assert m.outcome is Outcome.OK, m.error
    assert m.summary is not None and m.summary.p50_ms < 0.1, "saxpy n1m is a µs kernel"
    assert len(m.samples_ms) + m.excluded_samples >= 1000
    assert "p99" in m.sampling_note and "1000" in m.sampling_note


def test_other_candidates_and_ragged_problem(saxpy, builder, measurer):
    problem = saxpy.problem("ragged")
    for genes in ({"BLOCK": 128, "UNROLL": 4}, {"BLOCK": 1024, "UNROLL": 1}):
        candidate, build = builder(saxpy, problem, **genes)
        m = measurer.measure(saxpy, candidate, build, problem, SamplingPlan(rep_ms=5))
        assert m.outcome is Outcome.OK, (genes, m.error)


def test_remeasure_in_fresh_processes(saxpy, builder, measurer):
    problem = saxpy.problem("n1m")
    items = [builder(saxpy, problem), builder(saxpy, problem, BLOCK=128)]
    plan = SamplingPlan(rep_ms=5, min_samples=50)
    results = measurer.remeasure(saxpy, items, problem, plan, processes=2, seed=3)
    assert sorted(results) == sorted(c.key() for c, _ in items)
    for runs in results.values():
        assert [r.outcome for r in runs] == [Outcome.OK, Outcome.OK]
    fresh = measure_in_fresh_processes(saxpy, *items[0], problem, plan, processes=2)
    assert [r.outcome for r in fresh] == [Outcome.OK, Outcome.OK]


def test_graph_timing_replays_many_launches_per_sample(saxpy, builder, measurer):
    problem = saxpy.problem("n1m")
    candidate, build = builder(saxpy, problem)
    events = measurer.measure(
        saxpy, candidate, build, problem, SamplingPlan(rep_ms=10, timing="events")
    )
    graph = measurer.measure(
        saxpy, candidate, build, problem, SamplingPlan(rep_ms=10, timing="graph")
    )
    auto = measurer.measure(saxpy, candidate, build, problem, SamplingPlan(rep_ms=10))
    for m in (events, graph, auto):
        assert m.outcome is Outcome.OK, m.error
        assert m.rel_l2_error is not None and m.rel_l2_error <= 1e-6
    assert events.timing_method == "events" and events.launches_per_sample == 1
    assert graph.timing_method == "graph" and graph.launches_per_sample >= 2
    assert "one replay of" in graph.sampling_note
    # saxpy on 1M floats runs in a few microseconds: auto takes graph replays
    assert auto.timing_method == "graph"
    assert events.summary is not None and graph.summary is not None
    print(
        f"saxpy n1m p50: events {events.summary.p50_ms * 1e3:.2f} us, graph "
        f"{graph.summary.p50_ms * 1e3:.2f} us ({graph.launches_per_sample} launches per sample)"
    )


def test_a_screen_prunes_unchecked_or_hands_over_to_the_full_warm_up(saxpy, builder, measurer):
    import dataclasses
    import re

    problem = saxpy.problem("n1m")
    candidate, build = builder(saxpy, problem)
    plan = SamplingPlan(rep_ms=10, timing="events")
    cut = measurer.measure(
        saxpy, candidate, build, problem, dataclasses.replace(plan, prune_above_ms=1e-6)
    )
    kept = measurer.measure(
        saxpy, candidate, build, problem, dataclasses.replace(plan, prune_above_ms=1e3)
    )
    assert cut.outcome is Outcome.OK and cut.pruned and cut.rel_l2_error is None
    assert 10 <= len(cut.samples_ms) + cut.excluded_samples <= 100
    assert kept.outcome is Outcome.OK and not kept.pruned and kept.rel_l2_error is not None
    assert "screened first" in kept.sampling_note
    assert len(kept.samples_ms) + kept.excluded_samples >= plan.min_samples
    warmed = re.search(r"warm-up \d+ launches, (\d+) ms", kept.sampling_note)
    assert warmed and int(warmed.group(1)) >= plan.warmup_ms - 1  # the screen's time counts
    print(f"pruned: {cut.sampling_note}\nkept: {kept.sampling_note}")
