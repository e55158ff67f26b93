"""The gate's decisions, as pure functions: staleness first, then regression.

Regression compares the pinned member's *per-process medians* recorded in
the artifact with those of a fresh re-measurement. Run-to-run noise, not
within-run noise, dominates such comparisons: a plain Mann-Whitney p<0.05
on within-run samples flagged 13-48% of no-change comparisons once
run-to-run noise was 1-3% (RELIABILITY "Measured facts"). So a change is
called only when all of these hold:

1. both sides have at least ``min_processes`` (k >= 3) separate processes,
   else INCONCLUSIVE (insufficient baseline, RELIABILITY Q2);
2. the threshold ``T = max(floor, cv_factor x between-process CV)``
   (DESIGN "Regression threshold": T = max(2%, 5 x CV)) is at most
   ``max_threshold``, else the noise is too large to resolve a change that
   matters: INCONCLUSIVE (M1);
3. the relative change of the median of process medians exceeds T, and
4. Mann-Whitney U on the pooled samples (the process medians when no
   samples were kept) rejects "no difference" at ``alpha`` (asv's
   ``_is_result_better``: a factor *and* a test).

A large change that fails the test is INCONCLUSIVE, never a forced answer.
STALE outranks everything (S1): performance is not compared across
incompatible environments. The default build, re-measured in the same run,
is a *canary*: if it moved beyond T in the same direction, the machine
changed, not the tuned configuration, and the verdict is INCONCLUSIVE.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctune.errors import EXIT_GATE_FAILED, EXIT_INCONCLUSIVE, EXIT_OK
from ctune.records import FieldChange, Measurement, Outcome


class Verdict(enum.StrEnum):
    PASS = "PASS"
    IMPROVED = "IMPROVED"
    REGRESSED = "REGRESSED"
    INCONCLUSIVE = "INCONCLUSIVE"
    STALE = "STALE"


EXIT_CODES = {
    Verdict.PASS: EXIT_OK,
    Verdict.IMPROVED: EXIT_OK,
    Verdict.REGRESSED: EXIT_GATE_FAILED,
    Verdict.STALE: EXIT_GATE_FAILED,
    Verdict.INCONCLUSIVE: EXIT_INCONCLUSIVE,
}


@dataclass(frozen=True, slots=True)
class GatePolicy:
    min_processes: int = 3
    floor: float = 0.02  # T never below 2%
    cv_factor: float = 5.0
    max_threshold: float = 0.15  # a T above this cannot resolve changes that matter
    alpha: float = 0.01  # per comparison; the CLI divides a per-run budget (Q1)


@dataclass(frozen=True, slots=True)
class SampleSet:
    """One side of a comparison: a median per process, plus the pooled samples."""

    process_medians_ms: tuple[float, ...]
    samples_ms: tuple[float, ...] = ()

    @classmethod
    def from_measurements(cls, measurements: Sequence[Measurement]) -> SampleSet:
        """Per-process medians of the OK measurements (one Measurement per process)."""
        ok = [m for m in measurements if m.outcome is Outcome.OK and m.samples_ms]
        return cls(
            tuple(float(np.median(m.samples_ms)) for m in ok),
            tuple(s for m in ok for s in m.samples_ms),
        )


@dataclass(frozen=True, slots=True)
class Regression:
    """The outcome of one old-vs-new comparison, with its evidence."""

    verdict: Verdict
    reason: str
    change: float = math.nan  # new/old - 1 of the median of process medians (+ = slower)
    threshold: float = math.nan
    cv_old: float = math.nan
    cv_new: float = math.nan
    p_value: float = math.nan
    predicted_fpr: float = math.nan  # chance that no change would exceed T
    old_median_ms: float = math.nan
    new_median_ms: float = math.nan
    processes: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class GateReport:
    key: str
    verdict: Verdict
    reason: str
    changes: tuple[FieldChange, ...] = ()
    not_checked: tuple[str, ...] = ()
    candidate: Regression | None = None
    canary: Regression | None = None


# --- Mann-Whitney U ---------------------------------------------------------


def _exact_u_pvalue(u: float, n1: int, n2: int) -> float:
    """Two-sided exact p for U without ties: count rank arrangements by DP."""
    # counts[k] = number of arrangements with U == k (Mann & Whitney 1947 recursion)
    counts = np.zeros((n1 + 1, n2 + 1, n1 * n2 + 1))
    counts[:, 0, 0] = 1
    counts[0, :, 0] = 1
    for i in range(1, n1 + 1):
        for j in range(1, n2 + 1):
            counts[i, j, j:] += counts[i - 1, j, : n1 * n2 + 1 - j]
            counts[i, j] += counts[i, j - 1]
    dist = counts[n1, n2] / counts[n1, n2].sum()
    u_low = min(u, n1 * n2 - u)
    return float(min(1.0, 2 * dist[: math.floor(u_low + 1e-9) + 1].sum()))


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test: (U of x, p-value).

    Exact for small samples without ties (n1 + n2 <= 20), else the normal
    approximation with tie correction and continuity correction (the
    textbook/scipy "asymptotic" method). numpy only: scipy is not a
    dependency of ctune.
    """
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs two non-empty samples")
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(len(both))
    sorted_vals = both[order]
    _, first, counts = np.unique(sorted_vals, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0  # average 1-based rank of each tie group
    ranks[order] = np.repeat(avg, counts)
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    n = n1 + n2
    ties = bool((counts > 1).any())
    if not ties and n <= 20:
        return u1, _exact_u_pvalue(u1, n1, n2)
    tie_term = float((counts**3 - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:
        return u1, 1.0  # every value equal: no evidence of a difference
    mean = n1 * n2 / 2.0
    z = (abs(u1 - mean) - 0.5) / math.sqrt(var)
    return u1, float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))))


# --- decisions ----------------------------------------------------------------


def between_process_cv(medians: Sequence[float]) -> float:
    m = np.asarray(medians, dtype=float)
    if len(m) < 2 or m.mean() <= 0:
        return math.inf
    return float(m.std(ddof=1) / m.mean())


def predicted_fpr(threshold: float, cv: float, k_old: int, k_new: int) -> float:
    """Chance that a no-change comparison crosses ``threshold`` (normal model).

    The median of k process medians has sd about cv * sqrt(pi/2) / sqrt(k)
    (efficiency of the median); the difference of two such has the root sum.
    """
    if not math.isfinite(cv) or cv <= 0:
        return 0.0 if cv == 0 else 1.0
    sd = cv * math.sqrt(math.pi / 2) * math.sqrt(1 / k_old + 1 / k_new)
    return math.erfc(threshold / sd / math.sqrt(2))


def decide_regression(
    old: SampleSet, new: SampleSet, policy: GatePolicy | None = None
) -> Regression:
    """PASS, REGRESSED, IMPROVED or INCONCLUSIVE for lower-is-better times."""
    p = policy or GatePolicy()
    k_old, k_new = len(old.process_medians_ms), len(new.process_medians_ms)
    if k_old < p.min_processes or k_new < p.min_processes:
        return Regression(
            Verdict.INCONCLUSIVE,
            f"insufficient baseline: {k_old} recorded and {k_new} new processes; "
            f"need >= {p.min_processes} each",
            processes=(k_old, k_new),
        )
    cv_old = between_process_cv(old.process_medians_ms)
    cv_new = between_process_cv(new.process_medians_ms)
    cv = max(cv_old, cv_new)
    threshold = max(p.floor, p.cv_factor * cv)
    old_med = float(np.median(old.process_medians_ms))
    new_med = float(np.median(new.process_medians_ms))
    change = new_med / old_med - 1.0
    use_samples = bool(old.samples_ms) and bool(new.samples_ms)
    _, p_value = mann_whitney_u(
        old.samples_ms if use_samples else old.process_medians_ms,
        new.samples_ms if use_samples else new.process_medians_ms,
    )
    evidence: dict[str, Any] = dict(
        change=change,
        threshold=threshold,
        cv_old=cv_old,
        cv_new=cv_new,
        p_value=p_value,
        predicted_fpr=predicted_fpr(threshold, cv, k_old, k_new),
        old_median_ms=old_med,
        new_median_ms=new_med,
        processes=(k_old, k_new),
    )
    if threshold > p.max_threshold:
        return Regression(
            Verdict.INCONCLUSIVE,
            f"noise too large: between-process CV {cv:.1%} gives T={threshold:.1%} "
            f"> {p.max_threshold:.0%}; measure with more processes",
            **evidence,
        )
    if abs(change) <= threshold:
        return Regression(
            Verdict.PASS, f"change {change:+.1%} within T={threshold:.1%}", **evidence
        )
    if p_value >= p.alpha:
        return Regression(
            Verdict.INCONCLUSIVE,
            f"change {change:+.1%} beyond T={threshold:.1%} but not significant "
            f"(p={p_value:.3g} >= {p.alpha:.3g})",
            **evidence,
        )
    verdict = Verdict.REGRESSED if change > 0 else Verdict.IMPROVED
    word = "slower" if change > 0 else "faster"
    return Regression(
        verdict,
        f"{abs(change):.1%} {word} (T={threshold:.1%}, p={p_value:.3g})",
        **evidence,
    )


def confirm(first: Regression, second: Regression) -> Regression:
    """A REGRESSED verdict stands only if an independent re-measurement agrees (Q1)."""
    if first.verdict is not Verdict.REGRESSED:
        return first
    if second.verdict is Verdict.REGRESSED:
        return second
    return dataclasses.replace(
        second,
        verdict=Verdict.INCONCLUSIVE,
        reason=f"not confirmed: first run {first.reason}; second run {second.reason}",
    )


def failed_remeasurement(measurements: Sequence[Measurement]) -> str | None:
    """A reason when the pinned member no longer runs correctly; None if all OK."""
    bad = [m for m in measurements if m.outcome is not Outcome.OK]
    if not bad:
        return None
    outcomes = sorted({m.outcome.value for m in bad})
    first = next((m.error for m in bad if m.error), "")
    return f"re-measurement failed in {len(bad)} process(es): {', '.join(outcomes)}" + (
        f" ({first[:120]})" if first else ""
    )


def decide(
    key: str,
    changes: Sequence[FieldChange],
    not_checked: Sequence[str],
    candidate: Regression | None,
    canary: Regression | None = None,
    *,
    strict: bool = False,
) -> GateReport:
    """Combine staleness and regression into one verdict; STALE outranks all."""
    hard = [c for c in changes if c.severity == "hard"]
    soft = [c for c in changes if c.severity != "hard"]
    common: dict[str, Any] = dict(
        changes=tuple(changes), not_checked=tuple(not_checked), candidate=candidate, canary=canary
    )
    if hard or (strict and soft):
        names = ", ".join(c.name for c in (hard or soft))
        return GateReport(key, Verdict.STALE, f"stale: {names} changed", **common)
    if candidate is None:
        return GateReport(key, Verdict.INCONCLUSIVE, "not measured", **common)
    verdict, reason = candidate.verdict, candidate.reason
    if (
        verdict in (Verdict.REGRESSED, Verdict.IMPROVED)
        and canary is not None
        and canary.verdict is verdict
    ):
        verdict = Verdict.INCONCLUSIVE
        reason = (
            f"{reason}, but the default build moved too ({canary.change:+.1%}): "
            "the machine changed, not the tuned configuration"
        )
    return GateReport(key, verdict, reason, **common)


def exit_code(reports: Sequence[GateReport]) -> int:
    """Failure (stale, regressed) dominates inconclusive, which dominates pass."""
    codes = {EXIT_CODES[r.verdict] for r in reports}
    for code in (EXIT_GATE_FAILED, EXIT_INCONCLUSIVE):
        if code in codes:
            return code
    return EXIT_OK
