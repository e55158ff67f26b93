"""Quantiles and their distribution-free CIs (coverage checked by simulation), CV, Mann-Whitney."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctune.evidence import stats


def test_median_ci_ranks_match_the_textbook_table():
    # n = 100, 95%: the 40th and 61st order statistics (1-based)
    assert stats.quantile_ci_ranks(100, 0.5) == (39, 60)
    assert stats.quantile_ci_ranks(10, 0.5) == (1, 8)  # 2nd and 9th


def test_p99_from_100_samples_degrades_to_the_maximum():
    _, hi = stats.quantile_ci_ranks(100, 0.99)
    assert hi == 99  # the maximum: too few samples to bound p99 from above


def test_ranks_are_ordered_and_in_range():
    for n in (1, 2, 5, 50, 1000, 5000):
        for q in (0.01, 0.5, 0.95, 0.99):
            lo, hi = stats.quantile_ci_ranks(n, q)
            assert 0 <= lo <= hi <= n - 1


@pytest.mark.parametrize(("n", "q"), [(200, 0.5), (200, 0.95), (1000, 0.99), (60, 0.5)])
def test_ci_coverage_by_simulation(n, q):
    rng = np.random.default_rng(1234)
    reps = 3000
    draws = np.sort(rng.exponential(1.0, size=(reps, n)), axis=1)
    truth = -math.log(1.0 - q)  # exponential quantile
    lo, hi = stats.quantile_ci_ranks(n, q)
    covered = np.mean((draws[:, lo] <= truth) & (truth <= draws[:, hi]))
    assert 0.93 <= covered <= 0.995, covered


def test_binomial_cdf_is_a_distribution():
    cdf = stats._binomial_cdf(500, 0.3)
    assert cdf[-1] == pytest.approx(1.0, abs=1e-9)
    assert np.all(np.diff(cdf) >= -1e-15)


@pytest.mark.parametrize("q", [0.01, 0.05, 0.5, 0.9, 0.95, 0.99, 0.999])
def test_binomial_cdf_and_its_ranks_match_scipy(q):
    # the CDF is computed without scipy (a measuring process would import scipy.special for
    # it); scipy's bdtr is the reference: the same interval ranks for every n checked
    from scipy.special import bdtr

    sizes = [*range(1, 1201), *range(1201, 20001, 97), 4999, 5000, 10_000]
    for n in sizes:
        ours = stats._binomial_cdf(n, q)
        theirs = bdtr(np.arange(n + 1), n, q)
        assert np.max(np.abs(ours - theirs)) < 1e-9, n
        for alpha in (0.025, 0.005):  # the 95% and 99% intervals' sides
            assert _ranks(ours, alpha) == _ranks(theirs, alpha), (n, alpha)


def _ranks(cdf: np.ndarray, alpha: float) -> tuple[int, int]:
    """The order statistics an interval with ``alpha`` on each side takes from ``cdf``."""
    below = int(np.searchsorted(cdf, alpha, side="right"))
    return below, int(np.searchsorted(cdf, 1 - alpha, side="left"))


def test_summarizing_samples_imports_no_scipy():
    # every measuring process summarizes its samples: scipy's import (0.45-0.85 s of a
    # process's set-up on an H200) must not be on that path
    import subprocess
    import sys

    code = (
        "import sys; from ctune.evidence import stats; import ctune.measure.worker;"
        "stats.summarize([1.0, 2.0, 3.0] * 100);"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_summarize_orders_quantiles_and_bounds():
    rng = np.random.default_rng(5)
    samples = rng.lognormal(0.0, 0.3, size=2000)
    s = stats.summarize(samples)
    assert s.n == 2000
    assert s.min_ms <= s.p50_ms <= s.p95_ms <= s.p99_ms <= s.max_ms
    for est, (lo, hi) in (
        (s.p50_ms, s.p50_ci_ms),
        (s.p95_ms, s.p95_ci_ms),
        (s.p99_ms, s.p99_ci_ms),
    ):
        assert lo <= est <= hi
    assert s.mean_ms == pytest.approx(float(np.mean(samples)))
    assert s.stdev_ms == pytest.approx(float(np.std(samples, ddof=1)))


def test_summarize_single_sample_and_empty():
    s = stats.summarize([2.0])
    assert s.p50_ms == s.p99_ms == s.min_ms == s.max_ms == 2.0 and s.stdev_ms == 0.0
    with pytest.raises(ValueError):
        stats.summarize([])


def test_quantile_and_ci_helpers():
    data = list(range(1, 101))
    assert stats.quantile(data, 0.5) == pytest.approx(50.5)
    lo, hi = stats.quantile_ci(data, 0.5)
    assert (lo, hi) == (40.0, 61.0)


def test_cv():
    assert math.isnan(stats.cv([1.0]))  # one process says nothing about run-to-run noise
    assert math.isnan(stats.cv([]))
    assert stats.cv([1.0, 1.0, 1.0]) == 0.0
    assert stats.cv([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)


def test_mann_whitney_same_and_shifted():
    rng = np.random.default_rng(0)
    a = rng.normal(1.0, 0.01, 200)
    b = rng.normal(1.0, 0.01, 200)
    assert stats.mann_whitney(a, b).p_value > 0.01
    shifted = stats.mann_whitney(a, b + 0.01)
    assert shifted.p_value < 1e-6
    assert shifted.effect < 0.5  # a tends to be smaller


# (x, y, U of x, two-sided p): exact for small samples without ties, else asymptotic
MWU_CASES = [
    ([1, 2, 3], [4, 5, 6], 0.0, 0.1),  # 2 of the 20 rank arrangements are this extreme
    ([1.1, 2.5, 3.2, 4.8, 5.0], [0.5, 0.7, 1.9, 2.2], 18.0, 0.06349206349206349),
    ([1, 2, 2, 3, 3, 3], [2, 3, 4, 4, 5], 5.5, 0.08871369199677616),
    (list(range(30)), [x + 10.5 for x in range(30)], 190.0, 0.00012477053789099933),
]


@pytest.mark.parametrize(("x", "y", "u", "p"), MWU_CASES)
def test_mann_whitney_known_values(x, y, u, p):
    result = stats.mann_whitney(x, y)
    assert result.u == pytest.approx(u)
    assert result.p_value == pytest.approx(p, rel=1e-9)


def test_mann_whitney_needs_two_samples():
    with pytest.raises(ValueError):
        stats.mann_whitney([], [1.0])


def test_mann_whitney_all_ties():
    assert stats.mann_whitney([1.0, 1.0], [1.0, 1.0]).p_value == 1.0


def test_the_tests_module_can_be_imported_ahead_in_the_background() -> None:
    """A search starts the import of scipy.stats as it begins (its confirmation needs it)."""
    import subprocess
    import sys

    code = (
        "import sys, threading; from ctune.evidence.stats import import_tests_in_background; "
        "assert 'scipy.stats' not in sys.modules; import_tests_in_background(); "
        "[t.join() for t in threading.enumerate() if t.name == 'ctune-import-scipy']; "
        "assert 'scipy.stats' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
