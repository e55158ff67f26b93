"""What an export holds, from a journal or from an artifact: one row per configuration.

Both sources reduce to the same rows (parameters, outcome, objective values, latency
statistics, build facts), so the T4 and CSV writers have one input and each format one
home.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctune.records import GeneValue, Trial
    from ctune.registry.schema import Artifact, FrontMember


@dataclass(frozen=True)
class Objective:
    name: str
    unit: str = ""
    direction: str = "min"


@dataclass
class Row:
    """One configuration: its genes and what became of it."""

    key: str
    configuration: dict[str, GeneValue]
    outcome: str  # an Outcome value; "infeasible" when it ran but broke a constraint
    values: dict[str, float] = field(default_factory=dict)  # objective name -> value
    stats_ms: dict[str, float] = field(default_factory=dict)  # p50_ms, p99_ms, mean_ms ...
    samples_ms: tuple[float, ...] = ()
    compile_s: float | None = None
    measure_s: float | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    role: str = ""  # journal: "" or "filler"; artifact: "baseline", "front", "pinned"


@dataclass
class Export:
    kernel: str
    problem: str
    device: str
    objectives: list[Objective]
    rows: list[Row]
    source: str  # what it was read from


def _objective(text: str) -> Objective:
    from ctune.objective.terms import get_term

    term = get_term(text)
    if term is None:
        return Objective(text)
    return Objective(text, term.unit, term.direction)


def from_journal(path: Path) -> Export:
    """Every trial of a journal (the baseline and fillers included), in journal order."""
    from ctune.search.journal import read

    replay, _ = read(Path(path))
    header = replay.header
    objectives = [_objective(t) for t in (header.get("objectives") or {}).get("objectives", [])]
    rows = [
        _trial_row(t, objectives, "filler" if t.candidate.key() in replay.fillers else "")
        for t in replay.trials
    ]
    return Export(
        kernel=str(header.get("kernel", "")),
        problem=str(header.get("problem", "")),
        device=str(header.get("device", "unknown")),
        objectives=objectives,
        rows=rows,
        source=str(path),
    )


def _trial_row(trial: Trial, objectives: list[Objective], role: str) -> Row:
    outcome = trial.outcome.value
    if trial.outcome.is_ok and trial.values is not None and not trial.feasible:
        outcome = "infeasible"
    row = Row(trial.candidate.key(), trial.candidate.as_dict(), outcome, role=role)
    for objective, value in zip(objectives, trial.values or (), strict=False):
        row.values[objective.name] = value
    m = trial.measurement
    if m is not None and m.summary is not None:
        s = m.summary
        row.stats_ms = {
            "p50_ms": s.p50_ms,
            "p95_ms": s.p95_ms,
            "p99_ms": s.p99_ms,
            "mean_ms": s.mean_ms,
            "min_ms": s.min_ms,
        }
        row.samples_ms = tuple(m.samples_ms)
        row.measure_s = m.wall_s
    if trial.build is not None:
        row.compile_s = trial.build.compile_s
        r = trial.build.resources
        facts = {"regs": r.regs, "spills_bytes": r.spills_bytes, "smem_bytes": r.smem_bytes}
        row.resources = {k: v for k, v in facts.items() if v is not None}
    return row


def from_artifact(artifact: Artifact, source: str) -> Export:
    """The baseline and the front of an artifact (the pinned member marked)."""
    objectives = [Objective(o.name, o.unit, o.direction) for o in artifact.objectives]
    rows = [_member_row(artifact.baseline, objectives, "baseline")]
    for member in artifact.front:
        role = "pinned" if member.key == artifact.pinned else "front"
        rows.append(_member_row(member, objectives, role))
    return Export(
        kernel=artifact.kernel,
        problem=artifact.problem,
        device=artifact.device_class,
        objectives=objectives,
        rows=rows,
        source=source,
    )


def _member_row(member: FrontMember, objectives: list[Objective], role: str) -> Row:
    row = Row(member.key, member.candidate.as_dict(), "ok", role=role)
    row.values = {o.name: v for o, v in zip(objectives, member.values, strict=False)}
    row.stats_ms = {
        k: float(v)
        for k, v in member.summary.items()
        if k.endswith("_ms") and isinstance(v, (int, float))
    }
    row.samples_ms = tuple(member.samples_ms)
    row.resources = dict(member.resources)
    return row


__all__ = ["Export", "Objective", "Row", "from_artifact", "from_journal"]
