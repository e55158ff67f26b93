"""The one comparison rule: its verdicts, and the search and the gate agreeing on the same data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctune.ci.gate import Verdict, decide_regression
from ctune.errors import UserError
from ctune.evidence.compare import Difference, NoiseRule, SampleSet, compare, predicted_fpr
from ctune.records import Measurement, Outcome
from ctune.search.confirm import significance


def _runs(rng: np.random.Generator, median: float, between: float, k: int = 3) -> list[Measurement]:
    out = []
    for _ in range(k):
        centre = median * (1 + between * rng.standard_normal())
        samples = centre * np.exp(0.01 * rng.standard_normal(300))
        out.append(Measurement("k", "p", Outcome.OK, samples_ms=tuple(samples.tolist())))
    return out


GATE_FOR = {
    Difference.SAME: Verdict.PASS,
    Difference.LOWER: Verdict.IMPROVED,
    Difference.HIGHER: Verdict.REGRESSED,
    Difference.UNRESOLVED: Verdict.INCONCLUSIVE,
}


@pytest.mark.parametrize("seed", range(30))
def test_search_significance_and_gate_verdict_agree(seed: int) -> None:
    """Same data, same answer: the search's "faster" is the gate's IMPROVED, and so on."""
    rng = np.random.default_rng(seed)
    ratio = [1.0, 0.97, 0.9, 1.1, 1.03][seed % 5]
    between = [0.002, 0.01, 0.04][seed % 3]
    base, member = _runs(rng, 1.0, between), _runs(rng, ratio, between)
    sig = significance(member, base)
    gate = decide_regression(SampleSet.from_measurements(base), SampleSet.from_measurements(member))
    assert gate.verdict is GATE_FOR[sig.difference], (sig.reason, gate.reason)
    assert gate.evidence is not None and gate.evidence.threshold == sig.threshold


def test_one_value_per_side_is_unresolved_never_same() -> None:
    got = compare(SampleSet((1.0,)), SampleSet((1.5,)))
    assert got.difference is Difference.UNRESOLVED and "too few processes" in got.reason


def test_three_medians_per_side_cannot_reach_p_below_0_1() -> None:
    """Exact Mann-Whitney on 3 vs 3: the most extreme arrangement has p = 0.1."""
    got = compare(SampleSet((1.0, 1.001, 0.999)), SampleSet((1.1, 1.101, 1.099)))
    assert got.difference is Difference.UNRESOLVED and got.p_value == pytest.approx(0.1)
    assert "not significant" in got.reason


def test_threshold_is_the_floor_or_five_times_the_noise() -> None:
    quiet = compare(SampleSet((1.0, 1.0001, 0.9999)), SampleSet((1.0, 1.0001, 0.9999)))
    assert quiet.threshold == pytest.approx(0.02) and quiet.difference is Difference.SAME
    noisy = compare(SampleSet((1.0, 1.01, 0.99)), SampleSet((1.0, 1.01, 0.99)))
    assert noisy.threshold == pytest.approx(5 * noisy.noise_cv) and noisy.threshold > 0.02


def test_more_processes_narrow_the_threshold_as_the_standard_error() -> None:
    """At 3 and 3 processes of equal CV, T is 5 x CV; the median of k medians narrows as
    1/sqrt(k), and so does T, so a comparison too noisy at 3 processes resolves with more.
    Each side counts with its own CV and k (a quiet side does not hide a noisy one)."""
    rule = NoiseRule()
    assert rule.threshold(0.01, 0.01, 3, 3) == pytest.approx(0.05)
    assert rule.threshold(0.01, 0.01, 12, 12) == pytest.approx(0.025)
    assert rule.threshold(0.01, 0.01, 5, 8) == pytest.approx(
        0.05 * math.sqrt((1 / 5 + 1 / 8) / (2 / 3))
    )
    assert rule.threshold(0.04, 0.0, 3, 100) == pytest.approx(5 * 0.04 * math.sqrt(0.5))
    assert rule.threshold(0.001, 0.001, 12, 12) == pytest.approx(0.02)  # never below the floor
    assert rule.threshold(math.nan, 0.01, 3, 3) == math.inf
    old = (1.0, 1.035, 0.965)
    few = compare(SampleSet(old), SampleSet((1.0, 1.035, 0.965)))
    assert few.difference is Difference.UNRESOLVED and "noise too large" in few.reason
    many = compare(SampleSet(old * 3), SampleSet((1.0, 1.035, 0.965) * 3))
    assert many.difference is Difference.SAME and many.threshold < 0.15


def test_noise_beyond_the_largest_threshold_is_unresolved() -> None:
    rule = NoiseRule(max_threshold=0.05)
    got = compare(SampleSet((1.0, 1.1, 0.9)), SampleSet((1.5, 1.6, 1.4)), rule)
    assert got.difference is Difference.UNRESOLVED and "noise too large" in got.reason


@pytest.mark.parametrize(
    "bad",
    [
        {"floor": math.nan},
        {"floor": -0.01},
        {"cv_factor": math.inf},
        {"max_threshold": 0.0},
        {"alpha": 2.0},
        {"alpha": 0.0},
        {"min_processes": 1},
    ],
)
def test_a_rule_out_of_range_is_refused_when_made(bad: dict[str, float]) -> None:
    """A NaN floor makes every change exceed T (a 0.3% change would be REGRESSED): the
    rule refuses it, naming the threshold, wherever it is made."""
    ((name, value),) = bad.items()
    with pytest.raises(UserError, match=f"noise rule {name}={value:g}: expected "):
        NoiseRule(**bad)


def test_a_floor_at_or_above_the_largest_threshold_is_refused() -> None:
    """T is never below the floor, so a floor at the largest T would make every verdict
    INCONCLUSIVE without a word: refused where the rule is made."""
    with pytest.raises(UserError, match=r"floor=0\.2 is not below max_threshold=0\.1"):
        NoiseRule(floor=0.2, max_threshold=0.1)
    assert NoiseRule(floor=0.02, max_threshold=0.05).max_threshold == 0.05


def test_predicted_false_alarm_rate() -> None:
    assert predicted_fpr(0.02, 0.003, 0.003, 3, 3) < 1e-9
    assert predicted_fpr(0.02, 0.02, 0.02, 3, 3) > 0.1
    assert predicted_fpr(0.02, 0.0, 0.0, 3, 3) == 0.0
    assert predicted_fpr(0.02, math.nan, 0.01, 3, 3) == 1.0
    # T = 5 x noise is 4.9 standard errors of the difference at any k: the same small rate
    rule = NoiseRule()
    for k_old, k_new, cv_old, cv_new in [
        (3, 3, 0.01, 0.01),
        (3, 10, 0.04, 0.03),
        (5, 8, 0.02, 0.01),
    ]:
        t = rule.threshold(cv_old, cv_new, k_old, k_new)
        assert predicted_fpr(t, cv_old, cv_new, k_old, k_new) == pytest.approx(1.0e-6, rel=0.05)


def test_replayed_records_compare_by_their_summaries() -> None:
    from ctune.testing.standins import summarize_samples

    def replayed(median: float) -> Measurement:
        summary = summarize_samples(np.full(5, median))
        return Measurement("k", "p", Outcome.OK, summary=summary)

    side = SampleSet.from_measurements([replayed(1.0), replayed(1.01), replayed(0.99)])
    assert side.process_medians_ms == (1.0, 1.01, 0.99) and side.samples_ms == ()
