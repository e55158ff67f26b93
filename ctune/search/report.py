"""Confirm the winners and say how sure we are; turn the result into an artifact.

Statistics (RELIABILITY "Measured facts", DESIGN "Regression threshold"):
run-to-run noise dominates within-run noise, so the front and the baseline
are re-measured in k fresh processes, interleaved, before anything is
reported (``Measurer.remeasure``).

- **Significance** (per member, latency): Mann-Whitney U on the pooled
  per-process samples, plus an effect size from per-process medians:
  ``effect = median(member medians) / median(baseline medians) - 1``.
  Significant only if ``p < 0.01`` and ``|effect| > max(2%, 5 x CV)``,
  where CV is the larger between-process coefficient of variation of the
  two sides' process medians.
- **Gain** (pinned member and every confirmed member, first objective):
  ``ratio`` = baseline/member (minimise) or member/baseline (maximise), with
  a 95% percentile CI from a hierarchical bootstrap: resample processes,
  then samples within each resampled process, recompute the objective on
  the pooled resample, for both sides independently (1000 rounds, seeded).
  Objectives that are not a statistic of the latency samples (energy,
  power) are bootstrapped over the per-process values only; with k = 3
  that interval is coarse, and it says so in ``method``.

Mann-Whitney comes from ``ctune.measure.stats`` (the gate uses the same);
a normal-approximation fallback with tie correction keeps the report
working where that module is absent.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.records import (
    Build,
    Candidate,
    GeneValue,
    Measurement,
    Quantiles,
    Trial,
)
from ctune.search.result import Gain, MemberResult, SearchResult, Significance

if TYPE_CHECKING:
    from ctune.kernelspec import KernelSpec, Problem
    from ctune.objective.spec import Objective, ObjectiveSpec
    from ctune.objective.terms import TermContext
    from ctune.registry.schema import Artifact

log = logging.getLogger(__name__)

P_SIGNIFICANT = 0.01
MIN_EFFECT = 0.02
CV_FACTOR = 5.0
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


# --- significance ----------------------------------------------------------------------


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(U, two-sided p) of ``ctune.measure.stats.mann_whitney``; no evidence without samples."""
    from ctune.measure.stats import mann_whitney as test

    if not a or not b:
        return 0.0, 1.0
    got = test(a, b)
    return float(got.u), float(got.p_value)


def _cv(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    if mean == 0:
        return 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var) / abs(mean)


def significance(member: Sequence[Measurement], baseline: Sequence[Measurement]) -> Significance:
    """Latency difference of a member vs the baseline (see the module docstring)."""
    import statistics

    med_m = [v for v in (median_of(m) for m in member) if v is not None]
    med_b = [v for v in (median_of(m) for m in baseline) if v is not None]
    cv = max(_cv(med_m), _cv(med_b))
    threshold = max(MIN_EFFECT, CV_FACTOR * cv)
    if not med_m or not med_b:
        return Significance(None, None, threshold, cv, False, "not tested")
    effect = statistics.median(med_m) / statistics.median(med_b) - 1.0
    pooled_m = [s for m in member for s in m.samples_ms]
    pooled_b = [s for m in baseline for s in m.samples_ms]
    if not pooled_m or not pooled_b:
        return Significance(None, effect, threshold, cv, False, "not tested")
    _, p = mann_whitney(pooled_m, pooled_b)
    significant = p < P_SIGNIFICANT and abs(effect) > threshold
    verdict = ("faster" if effect < 0 else "slower") if significant else "no significant difference"
    return Significance(p, effect, threshold, cv, significant, verdict)


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
    """The non-dominated members by their (confirmed) values, in input order."""
    from ctune.objective.pareto import as_minimization, non_dominated

    if not members:
        return []
    mask = non_dominated(as_minimization([m.values for m in members], directions))
    return [m for m, keep in zip(members, mask, strict=True) if keep]


def changed_genes(candidate: Candidate, defaults: Mapping[str, GeneValue]) -> dict[str, GeneValue]:
    return {k: v for k, v in candidate.genes if defaults.get(k) != v}


# --- the artifact --------------------------------------------------------------------------


def summarize(m: Measurement | None) -> dict[str, Any]:
    """p50/p95/p99/mean with 95% CIs, n, device, energy: the artifact's ``summary``."""
    if m is None:
        return {}
    out: dict[str, Any] = {}
    if m.samples_ms:
        out.update(_sample_summary(m.samples_ms))
    elif m.summary is not None:
        s = m.summary
        out.update(
            {
                "n": s.n,
                "p50_ms": s.p50_ms,
                "p95_ms": s.p95_ms,
                "p99_ms": s.p99_ms,
                "mean_ms": s.mean_ms,
                "p50_ci_ms": list(s.p50_ci_ms),
                "p95_ci_ms": list(s.p95_ci_ms),
                "p99_ci_ms": list(s.p99_ci_ms),
            }
        )
    if m.device is not None:
        out["device"] = m.device.describe()
    out["l2_policy"] = m.l2_policy
    out["timing_method"] = m.timing_method
    if m.launches_per_sample > 1:
        out["launches_per_sample"] = m.launches_per_sample
    if m.energy_j is not None:
        out["energy_j"] = m.energy_j
    if m.avg_power_w is not None:
        out["avg_power_w"] = m.avg_power_w
    return {k: v for k, v in out.items() if not (isinstance(v, float) and not math.isfinite(v))}


def _sample_summary(samples: Sequence[float]) -> dict[str, Any]:
    """Quantiles with distribution-free 95% CIs from order statistics (binomial ranks),
    plus a normal-theory CI for the mean."""
    from ctune.measure.stats import summarize

    q = summarize(samples)
    sd = q.stdev_ms / math.sqrt(q.n) * 1.96 if q.n > 0 else 0.0
    return {
        "n": q.n,
        "mean_ms": q.mean_ms,
        "mean_ci_ms": [q.mean_ms - sd, q.mean_ms + sd],
        "p50_ms": q.p50_ms,
        "p95_ms": q.p95_ms,
        "p99_ms": q.p99_ms,
        "p50_ci_ms": list(q.p50_ci_ms),
        "p95_ci_ms": list(q.p95_ci_ms),
        "p99_ci_ms": list(q.p99_ci_ms),
    }


def launch_of(spec: KernelSpec, candidate: Candidate, problem: Problem) -> dict[str, Any]:
    """The member's recorded launch; {} (with a warning) where the rule cannot evaluate it."""
    try:
        return spec.launch_geometry(candidate, problem)
    except UserError as exc:  # a launch rule the default passed but this candidate breaks
        log.warning("launch of %s not evaluable: %s", candidate.key(), exc)
        return {}


def _flags(build: Build | None) -> tuple[str, ...]:
    if build is None or not build.argv:
        return ()
    from ctune.compile.command import tuned_flags

    return tuple(tuned_flags(build.argv))


def _defines(spec: KernelSpec, candidate: Candidate, problem: Problem) -> dict[str, Any]:
    flag_names = {g.name for g in spec.flag_genes}
    out: dict[str, Any] = dict(problem.defines)
    out.update(
        {k: v for k, v in candidate.genes if k not in flag_names and k not in spec.runtime_names}
    )
    return out


def _runtime(spec: KernelSpec, candidate: Candidate) -> dict[str, Any]:
    """Runtime genes: a build reproduces them at launch, not with -D (they are not in argv)."""
    return {k: v for k, v in candidate.genes if k in spec.runtime_names}


def front_member(spec: KernelSpec, problem: Problem, m: MemberResult, keep_samples: bool) -> Any:
    from ctune.registry.schema import FrontMember

    measurement = m.measurement
    summary = summarize(measurement)
    if m.significance is not None and m.significance.p_value is not None:
        summary["p_value"] = m.significance.p_value
        summary["significant"] = m.significance.significant
    if m.significance is not None and m.significance.effect is not None:
        summary["effect"] = m.significance.effect
    if m.gain is not None:
        summary["gain"] = m.gain.ratio
        summary["gain_ci"] = [m.gain.low, m.gain.high]
    summary["processes"] = len(m.per_process)
    medians = tuple(v for v in (median_of(r) for r in m.per_process) if v is not None)
    samples = tuple(measurement.samples_ms) if keep_samples and measurement is not None else ()
    return FrontMember(
        candidate=m.candidate,
        key=m.key,
        values=tuple(float(v) for v in m.values),
        summary={
            k: v for k, v in summary.items() if not (isinstance(v, float) and not math.isfinite(v))
        },
        samples_ms=samples,
        process_medians_ms=medians,
        sass_sha256=(m.build.sass_sha256 or "") if m.build is not None else "",
        nvcc_flags=_flags(m.build),
        defines=_defines(spec, m.candidate, problem),
        launch=launch_of(spec, m.candidate, problem),
        resources=m.resources(),
        runtime=_runtime(spec, m.candidate),
    )


def device_class_of(result: SearchResult, spec: KernelSpec, fingerprint: Mapping[str, str]) -> str:
    from ctune.registry.layout import device_class

    base = result.baseline
    measurement = base.measurement if base is not None else None
    if measurement is not None and measurement.device is not None:
        return device_class(measurement.device)
    if fingerprint.get("gpu_name"):
        return device_class(fingerprint)
    return device_class({"sm": spec.arch, "gpu_name": "compile-only"})


def build_artifact(
    spec: KernelSpec,
    problem: Problem,
    objective: ObjectiveSpec,
    result: SearchResult,
    fingerprint: Mapping[str, str],
    provenance: Mapping[str, Any],
    *,
    protocol: Mapping[str, Any],
    inputs: Mapping[str, Any] | None = None,
) -> Artifact:
    """The registry artifact for ``result`` (samples kept for the pinned member and baseline)."""
    from ctune.registry.schema import Artifact, ObjectiveInfo

    if result.baseline is None:
        raise ValueError("a result without a baseline has no artifact")
    front = tuple(
        front_member(spec, problem, m, keep_samples=m.key == result.pinned) for m in result.front
    )
    baseline = front_member(spec, problem, result.baseline, keep_samples=True)
    try:
        from ctune.fingerprint import FIELDS

        fp = {k: str(v) for k, v in fingerprint.items() if k in FIELDS}
    except ImportError:
        fp = {k: str(v) for k, v in fingerprint.items()}
    extensions = {
        "objective_spec": objective.identity(),
        "objective_text": [o.text for o in objective.objectives],
        "search": {
            "plan": dict(result.plan),
            "stop_reason": result.stop_reason,
            "generations": result.generations,
            "failures": dict(result.failures),
            "infeasible": result.infeasible,
            "fillers": result.fillers,
            "confirm_processes": result.confirm_processes,
            "dropped": [{"key": k, "why": why} for k, why in result.dropped],
            "timing": {
                "wall_s": result.timing.wall_s,
                "compile_wait_s": result.timing.compile_wait_s,
                "measure_s": result.timing.measure_s,
                "confirm_s": result.timing.confirm_s,
                "gpu_busy_fraction": result.timing.gpu_busy_fraction,
            },
        },
    }
    from ctune.search.result import _clean

    return Artifact(
        kernel=spec.name,
        problem=problem.name,
        device_class=device_class_of(result, spec, fingerprint),
        fingerprint=fp,
        objectives=tuple(
            ObjectiveInfo(o["name"], o["direction"], o["unit"]) for o in objective.infos()
        ),
        front=front,
        baseline=baseline,
        pinned=result.pinned,
        provenance=dict(provenance),
        extensions=_clean(extensions),
        protocol=dict(protocol),
        inputs=dict(inputs or {}),
    )


def write_artifact(artifact: Artifact, path: Path) -> Path:
    """Write a result file ``ctune registry import`` accepts (the registry's own writer)."""
    from ctune.registry.store import write_result

    return Path(write_result(artifact, Path(path)))


def check_commit_target(registry: Path) -> None:
    """Before searching: --commit must have a branch to commit to (not a detached HEAD,
    not outside git), so an hours-long search never ends in a refused commit."""
    from ctune.registry.git import GitRegistry

    with GitRegistry(Path(registry)) as repo:
        repo.target_ref()


def commit_artifact(registry: Path, artifact: Artifact) -> tuple[Path, str | None]:
    """Write into the registry and commit; returns (path, commit sha)."""
    from ctune.registry.service import publish_artifact

    published = publish_artifact(Path(registry), artifact)
    commit = published.commit.commit if published.commit is not None else None
    return Path(published.path), commit


__all__ = [
    "build_artifact",
    "changed_genes",
    "check_commit_target",
    "commit_artifact",
    "front_of",
    "gain",
    "mann_whitney",
    "pick_for_confirmation",
    "pool",
    "significance",
    "summarize",
    "write_artifact",
]
