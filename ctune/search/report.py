"""Confirm the winners and say how sure we are.

Run-to-run noise dominates within-run noise, so the front and the baseline are re-measured
in fresh processes, interleaved, before anything is reported (``Measurer.remeasure``).
Each member gets the one comparison rule of ``ctune.evidence.compare`` against the
baseline, and the pinned and confirmed members a gain ratio with a hierarchical bootstrap
CI (docs/design.md, "The evidence"). The artifact a result becomes is assembled by
``ctune.registry.assemble``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctune.records import (
    Build,
    Candidate,
    GeneValue,
    Measurement,
    Quantiles,
    Trial,
)
from ctune.search.result import Gain, MemberResult

if TYPE_CHECKING:
    from ctune.objective.spec import Objective
    from ctune.objective.terms import TermContext

log = logging.getLogger(__name__)

BOOTSTRAP_ROUNDS = 1000


# --- pooling -----------------------------------------------------------------------


def median_of(m: Measurement) -> float | None:
    if m.samples_ms:
        import numpy as np

        return float(np.median(np.asarray(m.samples_ms, dtype=float)))
    return m.summary.p50_ms if m.summary is not None else None


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known and len(known) == len(values) else None


def pool(measurements: Sequence[Measurement]) -> Measurement | None:
    """One measurement holding every process's samples (summary recomputed from them).

    Without samples (a replayed record), each summary field is the median
    across processes. None if any process failed: such a member is not
    eligible (a flaky WRONG_RESULT is still a WRONG_RESULT).
    """
    if not measurements or any(not m.outcome.is_ok for m in measurements):
        return None
    first = measurements[0]
    samples = tuple(s for m in measurements for s in m.samples_ms)
    summary = None
    if not samples:
        summaries = [m.summary for m in measurements if m.summary is not None]
        if summaries:
            summary = _median_summary(summaries)
    return dataclasses.replace(
        first,
        samples_ms=samples,
        summary=summary,
        excluded_samples=sum(m.excluded_samples for m in measurements),
        energy_j=_mean_or_none([m.energy_j for m in measurements]),
        avg_power_w=_mean_or_none([m.avg_power_w for m in measurements]),
        wall_s=sum(m.wall_s for m in measurements),
    )


def _median_summary(summaries: Sequence[Quantiles]) -> Quantiles:
    import statistics

    def med(name: str) -> float:
        return float(statistics.median(getattr(s, name) for s in summaries))

    def med_ci(name: str) -> tuple[float, float]:
        return (
            float(statistics.median(getattr(s, name)[0] for s in summaries)),
            float(statistics.median(getattr(s, name)[1] for s in summaries)),
        )

    return Quantiles(
        n=sum(s.n for s in summaries),
        mean_ms=med("mean_ms"),
        p50_ms=med("p50_ms"),
        p95_ms=med("p95_ms"),
        p99_ms=med("p99_ms"),
        min_ms=min(s.min_ms for s in summaries),
        max_ms=max(s.max_ms for s in summaries),
        stdev_ms=med("stdev_ms"),
        p50_ci_ms=med_ci("p50_ci_ms"),
        p95_ci_ms=med_ci("p95_ci_ms"),
        p99_ci_ms=med_ci("p99_ci_ms"),
    )


# --- gain with a confidence interval -------------------------------------------------


def _ratio(member: float, base: float, direction: str) -> float | None:
    if direction == "max":
        return member / base if base > 0 else None
    return base / member if member > 0 else None


def bootstrap(
    objective: Objective,
    build: Build | None,
    runs: Sequence[Measurement],
    context: TermContext,
    seed: int = 0,
    rounds: int = BOOTSTRAP_ROUNDS,
) -> tuple[Any, str] | None:
    """``rounds`` bootstrap replicates of the objective for one side, and the method used.

    Hierarchical (processes, then samples within each) when the objective
    is a statistic of the latency samples, else over per-process values.
    None when neither is possible.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    if (
        runs
        and all(r.samples_ms for r in runs)
        and objective.from_samples(np.ones(2), context) is not None
    ):
        arrays = [np.asarray(r.samples_ms, dtype=float) for r in runs]
        k, n = len(arrays), min(len(a) for a in arrays)
        stacked = np.stack([a[:n] for a in arrays])  # equal lengths in practice
        procs = rng.integers(0, k, (rounds, k))
        picks = rng.integers(0, n, (rounds, k, n))
        resampled = stacked[procs[:, :, None], picks].reshape(rounds, k * n)
        values = objective.from_samples(resampled, context)
        return np.asarray(values, dtype=float), "hierarchical bootstrap (processes, then samples)"
    per_process = [objective.value(build, r, context) for r in runs]
    if not per_process or any(v is None for v in per_process):
        return None
    arr = np.asarray(per_process, dtype=float)
    means = arr[rng.integers(0, len(arr), (rounds, len(arr)))].mean(axis=1)
    return means, f"bootstrap over {len(arr)} per-process values (coarse for few processes)"


def gain(
    objective: Objective,
    member: tuple[Build | None, Sequence[Measurement], Measurement],
    baseline: tuple[Build | None, Sequence[Measurement], Measurement],
    context: TermContext,
    seed: int = 0,
    rounds: int = BOOTSTRAP_ROUNDS,
    baseline_replicates: tuple[Any, str] | None = None,
) -> Gain | None:
    """Ratio to the baseline on ``objective`` with a 95% bootstrap CI (module docstring).

    ``baseline_replicates`` (from :func:`bootstrap`) lets several members
    share the baseline's replicates.
    """
    import numpy as np

    m_build, m_runs, m_pooled = member
    b_build, b_runs, b_pooled = baseline
    m_value = objective.value(m_build, m_pooled, context)
    b_value = objective.value(b_build, b_pooled, context)
    if m_value is None or b_value is None:
        return None
    point = _ratio(m_value, b_value, objective.direction)
    if point is None:
        return None
    mine = bootstrap(objective, m_build, m_runs, context, seed + 1, rounds)
    theirs = baseline_replicates or bootstrap(objective, b_build, b_runs, context, seed, rounds)
    if mine is None or theirs is None or mine[1] != theirs[1]:
        return Gain(objective.text, point, point, point, "point estimate")
    mv, bv = mine[0], theirs[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = mv / bv if objective.direction == "max" else bv / mv
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return Gain(objective.text, point, point, point, "point estimate")
    low, high = np.percentile(ratios, [2.5, 97.5])
    return Gain(objective.text, point, float(low), float(high), mine[1])


# --- which members to confirm ------------------------------------------------------------


def pick_for_confirmation(
    trials: Sequence[Trial], directions: Sequence[str], limit: int
) -> list[Trial]:
    """The front's extremes first, then the least crowded, up to ``limit``.

    For one objective the "front" is the best few, so a lucky search
    measurement cannot win alone: the top ``limit`` are confirmed.
    """
    import numpy as np

    from ctune.objective.pareto import as_minimization, crowding_distance, non_dominated
    from ctune.search.strategy import min_form

    feasible = [t for t in trials if min_form(t, directions) is not None]
    if not feasible or limit <= 0:
        return []
    points = as_minimization([t.values for t in feasible], directions)  # type: ignore[misc]
    if len(directions) == 1:
        order = np.argsort(points[:, 0], kind="stable")
        return [feasible[i] for i in order[:limit]]
    mask = non_dominated(points)
    front = [t for t, keep in zip(feasible, mask, strict=True) if keep]
    pts = points[mask]
    chosen: list[int] = []
    for m in range(pts.shape[1]):
        best = int(np.argmin(pts[:, m]))
        if best not in chosen:
            chosen.append(best)
    crowd = crowding_distance(pts)
    for i in np.argsort(-crowd, kind="stable"):
        if len(chosen) >= limit:
            break
        if int(i) not in chosen:
            chosen.append(int(i))
    return [front[i] for i in chosen[:limit]]


def front_of(members: Sequence[MemberResult], directions: Sequence[str]) -> list[MemberResult]:
    """The non-dominated members by their (confirmed) values, in input order, one per
    point: of members with equal values, the one that changes the fewest genes (the
    default build when it is one of them). For one objective that is the one best build:
    build properties such as registers tie often, and equals are not a front."""
    from ctune.objective.pareto import as_minimization, non_dominated

    if not members:
        return []
    mask = non_dominated(as_minimization([m.values for m in members], directions))
    kept = [m for m, keep in zip(members, mask, strict=True) if keep]
    simplest: dict[tuple[float, ...], MemberResult] = {}
    for m in kept:
        point = tuple(m.values)
        if point not in simplest or len(m.changed) < len(simplest[point].changed):
            simplest[point] = m
    chosen = {id(m) for m in simplest.values()}
    return [m for m in kept if id(m) in chosen]


def changed_genes(candidate: Candidate, defaults: Mapping[str, GeneValue]) -> dict[str, GeneValue]:
    return {k: v for k, v in candidate.genes if defaults.get(k) != v}


__all__ = [
    "changed_genes",
    "front_of",
    "gain",
    "pick_for_confirmation",
    "pool",
]
