"""Sampling arithmetic: budgets -> counts, tails -> minimum samples, hang limits."""

from __future__ import annotations

import dataclasses

import pytest

from ctune.config import Settings
from ctune.errors import UserError
from ctune.measure import SamplingPlan
from ctune.measure import plan as P


@pytest.mark.parametrize(
    ("quantile", "kernel_ms", "expected"),
    [
        (0.99, 0.005, 1000),  # µs kernel: 10 samples beyond p99
        (0.99, 0.3, 200),  # >= 0.1 ms: 2 beyond
        (0.95, 0.005, 200),
        (0.95, 1.0, 40),
        (0.5, 0.005, 20),
        (0.5, 1.0, 4),
        (0.01, 0.005, 1000),  # a low tail is as hard as a high one
        (0.999, 0.005, 10000),
    ],
)
def test_quantile_min_samples(quantile, kernel_ms, expected):
    assert P.quantile_min_samples(quantile, kernel_ms) == expected


def test_budget_rule_when_it_dominates():
    count = P.sample_count(0.1, 0.1, SamplingPlan(rep_ms=100, min_samples=100, quantile=0.5))
    assert count.n == 1000 and count.by_budget == 1000 and not count.capped
    assert "rep_ms=100" in count.note


def test_min_samples_raise():
    count = P.sample_count(10.0, 10.0, SamplingPlan(rep_ms=100, min_samples=100, quantile=0.5))
    assert count.n == 100 and "min_samples=100" in count.note


def test_p99_raises_n_for_microsecond_kernels_and_says_so():
    plan = SamplingPlan(rep_ms=10, min_samples=100, quantile=0.99)
    count = P.sample_count(0.1, 0.005, plan)
    assert count.n == 1000
    assert "p99" in count.note and ">= 1000" in count.note
    long = P.sample_count(1.0, 1.0, plan)
    assert long.n == 200


def test_cap_at_max_samples_is_reported():
    plan = SamplingPlan(rep_ms=10, min_samples=100, max_samples=500, quantile=0.99)
    count = P.sample_count(0.1, 0.005, plan)
    assert count.n == 500 and count.capped
    assert "capped at max_samples=500" in count.note and "CI is wide" in count.note


def test_budget_cap():
    count = P.sample_count(0.001, 0.001, SamplingPlan(rep_ms=100, max_samples=5000))
    assert count.n == 5000 and count.capped


@pytest.mark.parametrize(
    "plan",
    [
        SamplingPlan(l2_policy="warm"),
        SamplingPlan(rep_ms=0),
        SamplingPlan(warmup_ms=-1),
        SamplingPlan(min_samples=0),
        SamplingPlan(min_samples=10, max_samples=5),
        SamplingPlan(quantile=1.0),
        SamplingPlan(quantile=0.0),
        SamplingPlan(timeout_s=-1),
        SamplingPlan(energy=True, energy_window_s=0.99),
    ],
)
def test_validate_refuses(plan):
    with pytest.raises(UserError):
        P.validate(plan)


def test_validate_accepts_defaults_and_one_second_energy():
    P.validate(SamplingPlan())
    P.validate(SamplingPlan(energy=True, energy_window_s=1.0))
    P.validate(SamplingPlan(energy=False, energy_window_s=0.1))  # only checked when asked


def test_short_energy_window_message_says_what_to_do():
    with pytest.raises(UserError, match=r"at least 1 s"):
        P.validate(SamplingPlan(energy=True, energy_window_s=0.25))


def test_warmup_batch_size():
    # 5 ms of GPU work...
    assert P.warmup_batch_size(0.5, 0.01) == 10
    # ...unless the host cannot enqueue that much under the 10 ms spin
    assert P.warmup_batch_size(0.001, 0.01) == 800
    assert P.warmup_batch_size(100.0, 0.01) == 1


def test_warmup_spin_covers_the_batch_enqueue_and_no_more():
    # 25 launches of a 0.2 ms kernel at 15 us each: 0.75 ms to enqueue -> the 1 ms floor
    assert P.warmup_spin_ms(25, 0.015) == P.WARMUP_SPIN_MIN_MS
    # a slow host (launcher kernels through ctypes): twice its enqueue time
    assert P.warmup_spin_ms(20, 0.1) == pytest.approx(4.0)
    # never longer than the sampling chunks' spin
    assert P.warmup_spin_ms(800, 0.01) == P.SPIN_MS
    # a warm-up batch's enqueue always fits inside its spin
    for kernel_ms, host_ms in [(0.2, 0.015), (0.001, 0.01), (0.05, 0.2), (3.0, 0.02)]:
        batch = P.warmup_batch_size(kernel_ms, host_ms)
        assert batch * host_ms <= P.warmup_spin_ms(batch, host_ms)


@pytest.mark.parametrize(
    ("means", "agree"),
    [
        ([1.0, 1.0], False),
        ([1.0, 1.0, 1.0], True),
        ([2.0, 1.0, 1.02, 1.03], True),
        ([1.0, 1.04, 1.0], False),
        ([1.0, 1.03, 1.0], True),
        ([0.0, 0.0, 0.0], False),
    ],
)
def test_batches_agree(means, agree):
    assert P.batches_agree(means) is agree


def test_chunk_size():
    assert P.chunk_size(0.105) == 100
    assert P.chunk_size(2.0) == 50
    assert P.chunk_size(500.0) == 1


def test_next_spin_grows_when_the_host_is_slow():
    assert P.next_spin_ms(10.0, 3.0, False) == 10.0
    assert P.next_spin_ms(10.0, 8.0, False) == 16.0
    assert P.next_spin_ms(10.0, 3.0, True) == 20.0
    assert P.next_spin_ms(80.0, 90.0, True) == P.SPIN_MAX_MS


def test_hang_timeout():
    assert P.hang_timeout_s(SamplingPlan(timeout_s=3), 100.0) == 3
    assert P.hang_timeout_s(SamplingPlan(), 0.2) == 10.0  # floor
    assert P.hang_timeout_s(SamplingPlan(), 2.0) == 40.0  # 20x the baseline
    assert P.hang_timeout_s(SamplingPlan(), 2.0, floor_s=60) == 60.0
    assert P.hang_timeout_s(SamplingPlan(), None) == P.UNKNOWN_BASELINE_TIMEOUT_S


def test_too_many_excluded():
    assert not P.too_many_excluded(0, 0)
    assert not P.too_many_excluded(100, 1000)
    assert P.too_many_excluded(101, 1000)


def test_check_seeds_fixed_per_problem():
    a = P.check_seeds("sq4096")
    assert a == P.check_seeds("sq4096")
    assert a[1] == a[0] + 1
    assert a != P.check_seeds("sq8192")


def test_plan_for_settings_spec_and_overrides():
    class Spec:
        l2_policy = "hot"
        timing = "graph"

    settings = Settings(warmup_ms=30.0, rep_ms=50.0, energy_window_s=2.0)
    plan = P.plan_for(settings, Spec(), quantile=0.99, min_samples=None, energy=True)  # type: ignore[arg-type]
    assert (plan.warmup_ms, plan.rep_ms, plan.energy_window_s) == (30.0, 50.0, 2.0)
    assert plan.l2_policy == "hot" and plan.quantile == 0.99 and plan.energy
    assert plan.timing == "graph"  # the spec's, unless the settings name one
    events = P.plan_for(Settings(timing="events"), Spec())  # type: ignore[arg-type]
    assert events.timing == "events"
    assert plan.min_samples == SamplingPlan().min_samples
    raised = P.plan_for(None, None, min_samples=8000)
    assert raised.max_samples == 8000


@pytest.mark.parametrize(
    ("requested", "kernel_ms", "method"),
    [
        ("auto", 0.004, "graph"),
        ("auto", 0.5, "events"),
        ("events", 0.004, "events"),
        ("graph", 0.5, "graph"),
    ],
)
def test_timing_method(requested: str, kernel_ms: float, method: str) -> None:
    assert P.timing_method(requested, kernel_ms) == method


def test_graph_launches_hold_about_a_fifth_of_a_millisecond() -> None:
    assert P.graph_launches(0.004) == 50
    assert P.graph_launches(1e-5) == P.GRAPH_MAX_LAUNCHES
    assert P.graph_launches(5.0) == 2


def test_a_recorded_plan_without_timing_was_timed_with_events() -> None:
    data = dataclasses.asdict(SamplingPlan())
    del data["timing"]
    assert P.plan_from_json(data).timing == "events"
    with pytest.raises(UserError, match="timing='bursts'"):
        P.validate(SamplingPlan(timing="bursts"))


def test_plan_json_round_trip():
    plan = SamplingPlan(quantile=0.99, l2_policy="hot", energy=True, timeout_s=3)
    assert P.plan_from_json(P.plan_to_json(plan)) == plan
    with pytest.raises(ValueError, match="unknown"):
        P.plan_from_json({**dataclasses.asdict(plan), "bogus": 1})


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("rep_ms", "x", "rep_ms='x' is not a number"),
        ("warmup_ms", [1], "warmup_ms=[1] is not a number"),
        ("rep_ms", True, "rep_ms=True is not a number"),  # a bool is no number
        ("min_samples", 1.5, "min_samples=1.5 is not a whole number"),
        ("energy", 1, "energy=1 is not true or false"),
        ("timing", 3, "timing=3 is not a string"),
        ("prune_above_ms", "a", "prune_above_ms='a' is not a number or null"),
    ],
)
def test_a_recorded_value_of_the_wrong_type_is_named(field: str, value: object, said: str):
    """A hand-edited plan once reached check's arithmetic: "could not convert string"."""
    with pytest.raises(ValueError) as caught:
        P.plan_from_json({**dataclasses.asdict(SamplingPlan()), field: value})
    assert str(caught.value) == said
    # a whole number is a number, and a missing pruning threshold is none
    read = P.plan_from_json({"rep_ms": 100, "prune_above_ms": None})
    assert read.rep_ms == 100 and read.prune_above_ms is None


def test_a_screened_candidate_keeps_the_protocols_batches_only_under_the_protocols_warmup():
    from ctune.measure.plan import SCREEN_BATCH_MS, WARMUP_BATCH_MS, rest_batch_ms
    from ctune.search.pruning import SEARCH_WARMUP_MS

    assert rest_batch_ms(SamplingPlan().warmup_ms) == WARMUP_BATCH_MS  # 25 ms: the protocol
    assert rest_batch_ms(SEARCH_WARMUP_MS) == SCREEN_BATCH_MS  # the search phase's 5 ms
