"""Statistics over timing samples: quantiles with distribution-free CIs, CV, Mann-Whitney.

Kernel timings are not close to normal, so a quantile's confidence interval is a pair of
order statistics from the binomial, valid for any continuous distribution. Mann-Whitney
comes from ``scipy.stats``, imported on first use; the binomial is computed here with
numpy alone (:func:`_binomial_cdf`), so measuring processes, which all summarize their
samples, never import scipy. Why, with the numbers: docs/design.md, "The evidence".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ctune.records import Quantiles

CONFIDENCE = 0.95


def import_tests_in_background() -> None:
    """Import ``scipy.stats`` in a daemon thread: a search calls this as it starts, so
    that its confirmation's first Mann-Whitney test does not wait for the import (the
    search's process mostly waits on its worker meanwhile)."""
    from ctune.interrupts import start_thread

    def load() -> None:
        import scipy.stats  # noqa: F401

    start_thread(load, name="ctune-import-scipy")


def quantile(samples: Sequence[float] | np.ndarray, q: float) -> float:
    """The sample quantile (numpy's default linear interpolation)."""
    data = np.asarray(samples, dtype=np.float64)
    if data.size == 0:
        raise ValueError("quantile of no samples")
    return float(np.quantile(data, q))


@lru_cache(maxsize=256)
def _binomial_cdf(n: int, q: float) -> np.ndarray:
    """P(B <= k) for k = 0..n, B ~ Binomial(n, q) (read-only: it is cached).

    The probabilities are built in log space, each from the one before (pmf(k + 1) =
    pmf(k) (n - k) / (k + 1) q / (1 - q)), so that none underflows before it is scaled;
    their running sum, normalized, is the CDF. Against ``scipy.special.bdtr`` it differs
    by at most 5e-11 and gives the same interval ranks for every n up to 20,000 at
    q = 0.01-0.999 (a test compares every n up to 1,200 and a sample beyond)."""
    k = np.arange(n, dtype=np.float64)
    steps = np.log(n - k) - np.log1p(k) + (math.log(q) - math.log1p(-q))
    log_pmf = n * math.log1p(-q) + np.concatenate(([0.0], np.cumsum(steps)))
    cdf = np.cumsum(np.exp(log_pmf - log_pmf.max()))
    cdf /= cdf[-1]
    cdf.setflags(write=False)
    return cdf


def quantile_ci_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """0-based indices (lo, hi) into the sorted samples bounding the q-quantile.

    With B the number of samples below the true quantile, the lower bound
    X(l) misses when B < l and the upper X(u) misses when B >= u; each side
    is given at most (1 - confidence) / 2. Sides that cannot reach that
    (too few samples) fall back to the minimum or maximum.
    """
    if n < 1:
        raise ValueError("no samples")
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile {q} outside (0, 1)")
    alpha = (1.0 - confidence) / 2.0
    cdf = _binomial_cdf(n, q)
    # largest 1-based l with P(B <= l - 1) <= alpha: the count of cdf entries <= alpha
    lower = max(1, int(np.searchsorted(cdf, alpha, side="right")))
    # smallest 1-based u with P(B >= u) = 1 - cdf[u - 1] <= alpha
    upper = min(n, int(np.searchsorted(cdf, 1.0 - alpha, side="left")) + 1)
    upper = max(upper, lower)
    return lower - 1, upper - 1


def quantile_ci(
    samples: Sequence[float] | np.ndarray, q: float, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    data = np.sort(np.asarray(samples, dtype=np.float64))
    lo, hi = quantile_ci_ranks(int(data.size), q, confidence)
    return float(data[lo]), float(data[hi])


def summarize(samples: Sequence[float] | np.ndarray) -> Quantiles:
    """p50/p95/p99, mean, min, max, stdev, each quantile with its 95% CI."""
    data = np.sort(np.asarray(samples, dtype=np.float64))
    n = int(data.size)
    if n == 0:
        raise ValueError("summary of no samples")

    def ci(q: float) -> tuple[float, float]:
        lo, hi = quantile_ci_ranks(n, q)
        return float(data[lo]), float(data[hi])

    return Quantiles(
        n=n,
        mean_ms=float(data.mean()),
        p50_ms=float(np.quantile(data, 0.5)),
        p95_ms=float(np.quantile(data, 0.95)),
        p99_ms=float(np.quantile(data, 0.99)),
        min_ms=float(data[0]),
        max_ms=float(data[-1]),
        stdev_ms=float(data.std(ddof=1)) if n > 1 else 0.0,
        p50_ci_ms=ci(0.5),
        p95_ci_ms=ci(0.95),
        p99_ci_ms=ci(0.99),
    )


def cv(values: Sequence[float] | np.ndarray) -> float:
    """Coefficient of variation (sample stdev / mean) of per-process values.

    NaN when it is undefined (fewer than two values, or a mean that is not
    positive): one process says nothing about run-to-run noise, and callers
    must treat "unknown noise" as unresolved, never as "no noise".
    """
    data = np.asarray(values, dtype=np.float64)
    if data.size < 2:
        return math.nan
    mean = float(data.mean())
    if mean <= 0.0:
        return math.nan
    return float(data.std(ddof=1)) / mean


@dataclass(frozen=True, slots=True)
class MannWhitney:
    u: float  # U statistic of the first sample
    p_value: float  # two-sided; exact for small samples without ties, else asymptotic
    effect: float  # common-language effect size: P(a > b) + P(a == b) / 2


def mann_whitney(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> MannWhitney:
    """Two-sided Mann-Whitney U test (asv's is_different uses the same test).

    scipy's "auto" method: exact when a sample is small and there are no
    ties, else the normal approximation with tie and continuity corrections.
    Every value equal is no evidence of a difference (p = 1).
    """
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.size == 0 or y.size == 0:
        raise ValueError("Mann-Whitney needs two non-empty samples")
    if np.all(x == x[0]) and np.all(y == x[0]):
        return MannWhitney(x.size * y.size / 2.0, 1.0, 0.5)
    from scipy import stats as scipy_stats  # ~0.6 s to import: only where a test runs

    got = scipy_stats.mannwhitneyu(x, y, alternative="two-sided", method="auto")
    u = float(got.statistic)
    return MannWhitney(u, float(min(1.0, got.pvalue)), u / (x.size * y.size))


__all__ = [
    "CONFIDENCE",
    "MannWhitney",
    "cv",
    "mann_whitney",
    "quantile",
    "quantile_ci",
    "quantile_ci_ranks",
    "summarize",
]
