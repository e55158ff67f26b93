"""The gate's decisions, as pure functions: staleness first, then regression.

Regression compares the pinned member's *per-process medians* recorded in
the artifact with those of a fresh re-measurement, by the one comparison
rule of ``ctune.evidence.compare`` (the search's confirmation uses the same
function and threshold). A large change the rule cannot resolve is
INCONCLUSIVE, never a forced answer. STALE outranks everything: performance
is not compared across incompatible environments. The default build,
re-measured in the same run, is a *canary*: if it moved beyond T in the same
direction, the machine changed, not the tuned configuration, and the verdict
is INCONCLUSIVE.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctune.errors import EXIT_GATE_FAILED, EXIT_INCONCLUSIVE, EXIT_OK
from ctune.evidence.compare import Comparison, Difference, NoiseRule, SampleSet, compare
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
class Regression:
    """The gate's verdict on one old-vs-new comparison, with the comparison as evidence."""

    verdict: Verdict
    reason: str
    evidence: Comparison | None = None  # None when nothing could be compared (a fault)


@dataclass(frozen=True, slots=True)
class GateReport:
    key: str
    verdict: Verdict
    reason: str
    changes: tuple[FieldChange, ...] = ()
    not_checked: tuple[str, ...] = ()
    candidate: Regression | None = None
    canary: Regression | None = None
    #: ``--vendor``: the pinned member against the spec's vendor call measured in the same
    #: run, as old (the vendor) -> new (the pinned member); REGRESSED: slower than it
    vendor: Regression | None = None
    vendor_name: str = ""


# --- decisions ----------------------------------------------------------------

_VERDICTS = {
    Difference.SAME: Verdict.PASS,
    Difference.LOWER: Verdict.IMPROVED,
    Difference.HIGHER: Verdict.REGRESSED,
    Difference.UNRESOLVED: Verdict.INCONCLUSIVE,
}


def decide_regression(old: SampleSet, new: SampleSet, rule: NoiseRule | None = None) -> Regression:
    """PASS, REGRESSED, IMPROVED or INCONCLUSIVE for lower-is-better times."""
    c = compare(old, new, rule)
    reason = c.reason
    if c.difference is Difference.UNRESOLVED and c.reason.startswith("too few processes"):
        reason = f"insufficient baseline: {c.reason}"
    return Regression(_VERDICTS[c.difference], reason, c)


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
    vendor: Regression | None = None,
    vendor_name: str = "",
) -> GateReport:
    """Combine staleness and regression into one verdict; STALE outranks all. A pinned
    member that passes is REGRESSED when it is slower than the vendor call (``vendor``), and
    INCONCLUSIVE when that comparison could not be made."""
    hard = [c for c in changes if c.severity == "hard"]
    soft = [c for c in changes if c.severity != "hard"]
    common: dict[str, Any] = dict(
        changes=tuple(changes),
        not_checked=tuple(not_checked),
        candidate=candidate,
        canary=canary,
        vendor=vendor,
        vendor_name=vendor_name,
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
            f"{reason}, but the default build moved too ({_change(canary):+.1%}): "
            "the machine changed, not the tuned configuration"
        )
    if vendor is not None and verdict in (Verdict.PASS, Verdict.IMPROVED):
        if vendor.verdict is Verdict.REGRESSED:
            verdict, reason = Verdict.REGRESSED, f"slower than {vendor_name}: {vendor.reason}"
        elif vendor.verdict is Verdict.INCONCLUSIVE:
            verdict = Verdict.INCONCLUSIVE
            reason = f"{reason}; against {vendor_name}: {vendor.reason}"
    return GateReport(key, verdict, reason, **common)


def _change(r: Regression) -> float:
    return r.evidence.change if r.evidence is not None else float("nan")


def exit_code(reports: Sequence[GateReport]) -> int:
    """Failure (stale, regressed) dominates inconclusive, which dominates pass."""
    codes = {EXIT_CODES[r.verdict] for r in reports}
    for code in (EXIT_GATE_FAILED, EXIT_INCONCLUSIVE):
        if code in codes:
            return code
    return EXIT_OK
