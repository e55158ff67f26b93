"""What a search measures of a candidate: less than the protocol, where the decision allows.

The search phase only ranks: what a search reports (and an artifact records) is
re-measured in fresh processes with the protocol's full plan. So two rules, search policy
outside the protocol, cut its GPU time: pruning (a one-objective latency or throughput
search stops a candidate whose short screen sits more than a margin above the leader, a
threshold the worker applies itself) and a smaller sampling budget and warm-up for the
candidates that go on. The rules and their numbers: docs/search.md.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from ctune.errors import UserError
from ctune.objective.terms import LatencyTerm, ThroughputTerm

if TYPE_CHECKING:
    from ctune.measure import SamplingPlan
    from ctune.objective.spec import ObjectiveSpec
    from ctune.objective.terms import TermContext
    from ctune.records import Trial

#: a candidate whose first samples' median is this much above the leader stops there
DEFAULT_PRUNE_MARGIN = 0.10
#: GPU time (ms) a search samples a candidate that was not pruned, when confirmation runs
DEFAULT_SEARCH_REP_MS = 25.0
#: the fewest samples of such a candidate (the protocol's ``min_samples`` is 100), before
#: the quantile's own floor
SEARCH_MIN_SAMPLES = 30
#: GPU time (ms) of warm-up before such a candidate's samples, screen included (the
#: protocol's is 25), still until three batch means agree
SEARCH_WARMUP_MS = 5.0


def parse_margin(text: str | float, option: str = "--dispatch-margin", below: float = 1.0) -> float:
    """``3%``, ``0.03`` or ``3 %`` -> 0.03 (a fraction, 0 to ``below``): a margin given as a
    share, the pruning's and the dispatch cover's."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1].strip()) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UserError(f"{option} {text!r}: expected a share like 3% or 0.03") from None
    if not (math.isfinite(value) and 0 <= value < below):
        raise UserError(f"{option} {text!r}: expected 0% to <{below:.0%}")
    return value


def parse_prune_margin(text: str) -> float | None:
    """``--prune-margin``: ``10%``, ``0.1``, or ``off`` (None: never prune)."""
    if text.strip().lower() in ("off", "none", "no"):
        return None
    value = parse_margin(text, "--prune-margin", below=10.0)
    if value <= 0:
        raise UserError(f"--prune-margin {text!r}: expected more than 0% (or off)")
    return value


def prune_threshold_ms(
    objective: ObjectiveSpec, leader: Trial | None, margin: float | None, context: TermContext
) -> float | None:
    """Median (ms) above which a new candidate is pruned, or None: do not prune."""
    if margin is None or leader is None or len(objective.objectives) != 1:
        return None
    parts = objective.objectives[0].parts
    m = leader.measurement
    if len(parts) != 1 or m is None or not m.outcome.is_ok or m.summary is None:
        return None
    term = parts[0][1]
    if isinstance(term, LatencyTerm):
        value = term.value(leader.build, m, context)
    elif isinstance(term, ThroughputTerm):
        value = m.summary.p50_ms  # the rate is the median's inverse
    else:
        return None
    if value is None or not value > 0:
        return None
    return value * (1.0 + margin)


def search_phase_plan(
    plan: SamplingPlan, threshold_ms: float | None, search_rep_ms: float | None, confirms: bool
) -> SamplingPlan:
    """The plan a search measures a new candidate with: ``plan`` with the pruning threshold,
    and with the search phase's sampling budget when confirmation re-measures the result."""
    if threshold_ms is not None:
        plan = dataclasses.replace(plan, prune_above_ms=threshold_ms)
    if confirms and search_rep_ms is not None and search_rep_ms < plan.rep_ms:
        plan = dataclasses.replace(
            plan,
            rep_ms=search_rep_ms,
            min_samples=min(plan.min_samples, SEARCH_MIN_SAMPLES),
            warmup_ms=min(plan.warmup_ms, SEARCH_WARMUP_MS),
        )
    return plan


def parse_search_rep(text: str) -> float | None:
    """``--search-rep-ms``: milliseconds (> 0), or ``full`` (None: the protocol's rep_ms)."""
    if text.strip().lower() in ("full", "off", "none"):
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise UserError(
            f"--search-rep-ms {text!r}: expected milliseconds above 0, or full (the "
            "protocol's rep_ms for every candidate)"
        )
    return value


__all__ = [
    "DEFAULT_PRUNE_MARGIN",
    "DEFAULT_SEARCH_REP_MS",
    "SEARCH_MIN_SAMPLES",
    "SEARCH_WARMUP_MS",
    "parse_margin",
    "parse_prune_margin",
    "parse_search_rep",
    "prune_threshold_ms",
    "search_phase_plan",
]
