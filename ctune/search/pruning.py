"""Pruning: a candidate clearly slower than the search's leader stops after a short chunk.

A search spends most of its GPU time confirming what it already knows: a candidate whose
first ten-odd samples sit well above the leader will not lead. Like Optuna's pruners, the
search stops such a trial early; unlike them, the rule is one threshold known before the
candidate runs, so the measuring worker applies it itself, after its first chunk (a few
milliseconds), with no round trip. The trial keeps its (short) measurement, marked
``pruned``, and the strategy is told its value: it is a real measurement, only shorter.

Only one-objective searches on a latency statistic (p50, p95, p99, mean) or on a
throughput from the median prune: with several objectives a slow candidate can still be
on the front (less energy, fewer registers). The threshold is the leader's own statistic
times (1 + margin): a candidate's median above it means its p99 (>= its median) is too,
so a p99 search never prunes a candidate that could lead. The default margin, 25%, is
well above run-to-run noise (a few % on a busy GPU; docs/design.md's measured facts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctune.errors import UserError
from ctune.objective.terms import LatencyTerm, ThroughputTerm

if TYPE_CHECKING:
    from ctune.objective.spec import ObjectiveSpec
    from ctune.objective.terms import TermContext
    from ctune.records import Trial

#: a candidate whose first samples' median is this much above the leader stops there
DEFAULT_PRUNE_MARGIN = 0.25


def parse_prune_margin(text: str) -> float | None:
    """``--prune-margin``: ``25%``, ``0.25``, or ``off`` (None: never prune)."""
    from ctune.search.dispatch import parse_margin

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


__all__ = ["DEFAULT_PRUNE_MARGIN", "parse_prune_margin", "prune_threshold_ms"]
