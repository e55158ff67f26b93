"""The one rule that says whether two timings differ: the search's confirmation and the gate.

Run-to-run noise, not within-run noise, dominates such comparisons, so a difference is
called only when both sides have enough separate processes, the noise-scaled threshold is
small enough to resolve a change that matters, the median of process medians moved beyond
it, and Mann-Whitney rejects "no difference"; anything else is UNRESOLVED or SAME. The
search's "faster" and the gate's "REGRESSED" come from this one function, so they cannot
disagree on the same data. The rule and its numbers: docs/design.md, "The evidence".
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ctune.evidence.noise_rule import NoiseRule
from ctune.evidence.stats import cv, mann_whitney
from ctune.records import Measurement, Outcome


class Difference(enum.StrEnum):
    SAME = "same"  # within T
    LOWER = "lower"  # the new side is faster (a lower time)
    HIGHER = "higher"  # the new side is slower
    UNRESOLVED = "unresolved"  # too few processes, too much noise, or not significant


@dataclass(frozen=True, slots=True)
class SampleSet:
    """One side of a comparison: a median per process, plus the pooled samples."""

    process_medians_ms: tuple[float, ...]
    samples_ms: tuple[float, ...] = ()

    @classmethod
    def from_measurements(cls, measurements: Sequence[Measurement]) -> SampleSet:
        """Per-process medians of the OK measurements (one Measurement per process).

        A measurement that kept no samples (a replayed record) contributes its
        summary's median.
        """
        medians: list[float] = []
        samples: list[float] = []
        for m in measurements:
            if m.outcome is not Outcome.OK:
                continue
            if m.samples_ms:
                medians.append(float(np.median(m.samples_ms)))
                samples.extend(m.samples_ms)
            elif m.summary is not None:
                medians.append(m.summary.p50_ms)
        return cls(tuple(medians), tuple(samples))


@dataclass(frozen=True, slots=True)
class Comparison:
    """The outcome of one old-vs-new comparison, with its evidence."""

    difference: Difference
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

    @property
    def noise_cv(self) -> float:
        """The larger between-process CV of the two sides (NaN when either is unknown)."""
        if math.isnan(self.cv_old) or math.isnan(self.cv_new):
            return math.nan
        return max(self.cv_old, self.cv_new)

    @property
    def significant(self) -> bool:
        return self.difference in (Difference.LOWER, Difference.HIGHER)


def predicted_fpr(threshold: float, cv_old: float, cv_new: float, k_old: int, k_new: int) -> float:
    """Chance that a no-change comparison crosses ``threshold`` (normal model).

    The median of k process medians has sd about cv * sqrt(pi/2) / sqrt(k)
    (efficiency of the median); the difference of the two sides has the root sum.
    """
    if not (math.isfinite(cv_old) and math.isfinite(cv_new)) or min(cv_old, cv_new) < 0:
        return 1.0
    sd = math.sqrt(math.pi / 2) * math.sqrt(cv_old**2 / k_old + cv_new**2 / k_new)
    if sd == 0:
        return 0.0
    return math.erfc(threshold / sd / math.sqrt(2))


def compare(old: SampleSet, new: SampleSet, rule: NoiseRule | None = None) -> Comparison:
    """SAME, LOWER, HIGHER or UNRESOLVED for lower-is-better times (module docstring)."""
    r = rule or NoiseRule()
    k_old, k_new = len(old.process_medians_ms), len(new.process_medians_ms)
    if k_old < r.min_processes or k_new < r.min_processes:
        return Comparison(
            Difference.UNRESOLVED,
            f"too few processes: {k_old} old and {k_new} new; need >= {r.min_processes} each",
            processes=(k_old, k_new),
        )
    cv_old, cv_new = cv(old.process_medians_ms), cv(new.process_medians_ms)
    threshold = r.threshold(cv_old, cv_new, k_old, k_new)
    old_med = float(np.median(old.process_medians_ms))
    new_med = float(np.median(new.process_medians_ms))
    change = new_med / old_med - 1.0
    use_samples = bool(old.samples_ms) and bool(new.samples_ms)
    p_value = mann_whitney(
        old.samples_ms if use_samples else old.process_medians_ms,
        new.samples_ms if use_samples else new.process_medians_ms,
    ).p_value
    evidence = Comparison(
        Difference.UNRESOLVED,
        "",
        change=change,
        threshold=threshold,
        cv_old=cv_old,
        cv_new=cv_new,
        p_value=p_value,
        predicted_fpr=predicted_fpr(threshold, cv_old, cv_new, k_old, k_new),
        old_median_ms=old_med,
        new_median_ms=new_med,
        processes=(k_old, k_new),
    )
    return _decided(evidence, r)


def _decided(e: Comparison, r: NoiseRule) -> Comparison:
    if e.threshold > r.max_threshold:
        k_old, k_new = e.processes
        return replace(
            e,
            reason=f"noise too large: between-process CV {e.cv_old:.1%} old ({k_old} "
            f"processes), {e.cv_new:.1%} new ({k_new}) gives T={e.threshold:.1%} "
            f"> {r.max_threshold:.0%}; measure with more processes",
        )
    if abs(e.change) <= e.threshold:
        return replace(
            e,
            difference=Difference.SAME,
            reason=f"change {e.change:+.1%} within T={e.threshold:.1%}",
        )
    if e.p_value >= r.alpha:
        return replace(
            e,
            reason=f"change {e.change:+.1%} beyond T={e.threshold:.1%} but not significant "
            f"(p={e.p_value:.3g} >= {r.alpha:.3g})",
        )
    word = "slower" if e.change > 0 else "faster"
    return replace(
        e,
        difference=Difference.HIGHER if e.change > 0 else Difference.LOWER,
        reason=f"{abs(e.change):.1%} {word} (T={e.threshold:.1%}, p={e.p_value:.3g})",
    )


__all__ = ["Comparison", "Difference", "NoiseRule", "SampleSet", "compare", "predicted_fpr"]
