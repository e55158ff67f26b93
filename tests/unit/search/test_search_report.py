"""Confirmation statistics: significance needs p and effect; gain CIs cover the truth."""

from __future__ import annotations

import numpy as np
import pytest

from ctune.evidence.compare import Difference
from ctune.objective import parse_objective_spec
from ctune.objective.terms import TermContext
from ctune.records import Build, Candidate, Measurement, Outcome, Trial
from ctune.search.confirm import significance
from ctune.search.report import (
    gain,
    pick_for_confirmation,
    pool,
)
from ctune.testing.standins import STANDIN_DEVICE, summarize_samples


def _runs(
    rng: np.random.Generator,
    median: float,
    k: int = 3,
    n: int = 400,
    between: float = 0.002,
    within: float = 0.01,
) -> list[Measurement]:
    out = []
    for _ in range(k):
        centre = median * (1 + between * rng.standard_normal())
        samples = centre * np.exp(within * rng.standard_normal(n))
        out.append(
            Measurement(
                "k",
                "p",
                Outcome.OK,
                STANDIN_DEVICE,
                samples_ms=tuple(samples.tolist()),
                summary=summarize_samples(samples),
            )
        )
    return out


BUILD = Build("k", ("nvcc",), "t", Outcome.OK)


def test_a_real_ten_percent_gain_is_significant() -> None:
    rng = np.random.default_rng(1)
    base, fast = _runs(rng, 1.0), _runs(rng, 0.9)
    sig = significance(fast, base)
    assert sig.significant and sig.difference is Difference.LOWER
    assert sig.change == pytest.approx(-0.1, abs=0.01)
    assert sig.threshold == pytest.approx(max(0.02, 5 * sig.noise_cv))


def test_a_one_percent_difference_is_not_significant_despite_small_p() -> None:
    rng = np.random.default_rng(2)
    base, close = _runs(rng, 1.0, n=2000), _runs(rng, 0.99, n=2000)
    sig = significance(close, base)
    assert sig.p_value is not None and sig.p_value < 0.01  # many samples: p alone says yes
    assert not sig.significant and sig.difference is Difference.SAME


def test_noisy_processes_raise_the_threshold() -> None:
    rng = np.random.default_rng(3)
    base, other = _runs(rng, 1.0, between=0.03), _runs(rng, 0.95, between=0.03)
    sig = significance(other, base)
    assert sig.threshold > 0.05 and not sig.significant


def test_gain_ci_covers_the_true_ratio() -> None:
    rng = np.random.default_rng(4)
    # no between-process offsets: with k = 3 the interval cannot see them (documented)
    base, fast = _runs(rng, 1.0, between=0.0), _runs(rng, 0.8, between=0.0)
    objective = parse_objective_spec(["p50"]).objectives[0]
    ctx = TermContext()
    g = gain(objective, (BUILD, fast, pool(fast)), (BUILD, base, pool(base)), ctx, seed=1)
    assert g is not None and g.low <= 1.25 <= g.high and g.low < g.ratio < g.high
    assert g.method.startswith("hierarchical bootstrap")
    tput = parse_objective_spec(["tflops"]).objectives[0]
    ctx = TermContext({}, {"flops": 1e9})
    g2 = gain(tput, (BUILD, fast, pool(fast)), (BUILD, base, pool(base)), ctx, seed=1)
    assert g2 is not None and g2.ratio == pytest.approx(g.ratio, rel=1e-6)


def test_gain_of_energy_bootstraps_processes() -> None:
    runs_b = [Measurement("k", "p", Outcome.OK, energy_j=e) for e in (1.0, 1.02, 0.98)]
    runs_m = [Measurement("k", "p", Outcome.OK, energy_j=e) for e in (0.5, 0.51, 0.49)]
    objective = parse_objective_spec(["energy"]).objectives[0]
    g = gain(objective, (BUILD, runs_m, pool(runs_m)), (BUILD, runs_b, pool(runs_b)), TermContext())
    assert g is not None and g.ratio == pytest.approx(2.0, rel=1e-6)
    assert "per-process values" in g.method and g.low <= 2.0 <= g.high


def test_pool_refuses_a_flaky_member_and_merges_samples() -> None:
    ok = Measurement("k", "p", Outcome.OK, samples_ms=(1.0, 2.0), energy_j=1.0)
    ok2 = Measurement("k", "p", Outcome.OK, samples_ms=(3.0,), energy_j=3.0)
    bad = Measurement("k", "p", Outcome.WRONG_RESULT)
    assert pool([ok, bad]) is None
    merged = pool([ok, ok2])
    assert merged is not None and merged.samples_ms == (1.0, 2.0, 3.0)
    assert merged.energy_j == 2.0 and merged.summary is None


def test_pick_for_confirmation_takes_extremes_first() -> None:
    def trial(i: int, values: tuple[float, float]) -> Trial:
        return Trial(i, 1, Candidate.of("k", {"A": i}), Outcome.OK, values=values)

    trials = [
        trial(0, (1.0, 9.0)),
        trial(1, (2.0, 5.0)),
        trial(2, (3.0, 4.0)),
        trial(3, (9.0, 1.0)),
        trial(4, (9.0, 9.0)),
        Trial(5, 1, Candidate.of("k", {"A": 5}), Outcome.COMPILE_ERROR),
    ]
    picked = pick_for_confirmation(trials, ("min", "min"), 2)
    assert [t.number for t in picked] == [0, 3]
    assert [t.number for t in pick_for_confirmation(trials, ("min", "min"), 10)] == [
        0,
        3,
        2,
        1,
    ]  # then by crowding
    ones = [
        Trial(i, 1, Candidate.of("k", {"A": i}), Outcome.OK, values=(v,))
        for i, v in enumerate([3.0, 9.0, 1.0, 7.0])
    ]
    assert [t.number for t in pick_for_confirmation(ones, ("max",), 2)] == [1, 3]
    assert [t.number for t in pick_for_confirmation(ones, ("min",), 3)] == [2, 0, 3]
