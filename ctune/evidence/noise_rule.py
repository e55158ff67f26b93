"""The thresholds of the one comparison rule (:mod:`ctune.evidence.compare`), apart from
it: plain numbers, so that what only shows or passes them (``ctune gate``'s option
defaults, a report's one-line description) needs neither numpy nor scipy."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ctune.errors import UserError

#: The process count per side at which ``cv_factor`` applies unscaled (the search's
#: confirmation and the gate's default).
REFERENCE_PROCESSES = 3


#: what each threshold must be, as (check, what "expected ..." says): a NaN floor or an
#: alpha of 2 would decide every comparison, silently (``NoiseRule`` and ``ctune gate``'s
#: options are checked against it)
LIMITS: dict[str, tuple[Callable[[float], bool], str]] = {
    "min_processes": (lambda v: v >= 2, "an integer >= 2"),
    "floor": (lambda v: 0 <= v < 1, "a finite fraction >= 0 and < 1 (0.02 is 2%)"),
    "cv_factor": (lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    "max_threshold": (lambda v: 0 < v < math.inf, "a finite fraction > 0 (0.15 is 15%)"),
    "alpha": (lambda v: 0 < v < 1, "a probability > 0 and < 1"),
}


def threshold_problem(name: str, value: float) -> str | None:
    """What is wrong with ``value`` for the threshold ``name`` ("expected ..."), or None."""
    ok, expected = LIMITS[name]
    return None if ok(value) else f"expected {expected}"


@dataclass(frozen=True, slots=True)
class NoiseRule:
    """The thresholds of :func:`ctune.evidence.compare.compare`; one value for the search and
    the gate. Each is range-checked when the rule is made (:data:`LIMITS`)."""

    min_processes: int = 3
    floor: float = 0.02  # T never below 2%
    cv_factor: float = 5.0
    max_threshold: float = 0.15  # a T above this cannot resolve changes that matter
    alpha: float = 0.01  # per comparison; the gate CLI divides a per-run budget

    def __post_init__(self) -> None:
        for name in LIMITS:
            value = getattr(self, name)
            problem = threshold_problem(name, value)
            if problem:
                raise UserError(f"noise rule {name}={value:g}: {problem}")
        if self.floor >= self.max_threshold:  # T >= floor: no comparison could resolve
            raise UserError(
                f"noise rule floor={self.floor:g} is not below max_threshold="
                f"{self.max_threshold:g}: every comparison would be INCONCLUSIVE; lower "
                "--floor or raise --max-threshold"
            )

    def describe(self) -> str:
        """The rule in one line, for reports."""
        return (
            f"Mann-Whitney p < {self.alpha:g} and change > max({self.floor:.0%}, "
            f"{self.cv_factor:g} x between-process CV) over >= {self.min_processes} processes"
            f" (the CV term narrows with more processes)"
        )

    def threshold(self, cv_old: float, cv_new: float, k_old: int, k_new: int) -> float:
        """``T`` for these between-process CVs and process counts (module docstring, rule
        2); infinite when either CV is unknown."""
        if math.isnan(cv_old) or math.isnan(cv_new):
            return math.inf
        reference = 2 / REFERENCE_PROCESSES
        noise = math.sqrt((cv_old**2 / k_old + cv_new**2 / k_new) / reference)
        return max(self.floor, self.cv_factor * noise)


__all__ = ["LIMITS", "REFERENCE_PROCESSES", "NoiseRule", "threshold_problem"]
