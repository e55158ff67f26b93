"""What ``ctune plot`` draws and exports, read from a journal or an artifact; no matplotlib.

Both sources become one :class:`Source`: the objectives, one :class:`Point`
per evaluation (a journal) or per front member and the baseline (an
artifact), the baseline, the front and the pinned member. Journals carry
every evaluation, so convergence and per-gene sensitivity come from them;
artifacts carry the confirmed front and the kept samples, so the front and
the measured distributions come from either. The series below are plain
lists, so tests and the CSV export read exactly what the figures draw.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctune.errors import UserError
from ctune.exchange.columns import extra_columns, fill_objectives, gene_columns, objective_columns
from ctune.files import read_head
from ctune.objective.pareto import as_minimization, sign
from ctune.objective.pareto import non_dominated as mask_of
from ctune.records import GeneValue, Measurement, Trial


@dataclass(frozen=True)
class Objective:
    name: str
    direction: str  # "min" or "max"
    unit: str

    @property
    def label(self) -> str:
        return f"{self.name} ({self.unit})"


@dataclass(frozen=True)
class Point:
    """One evaluated candidate (or artifact member) as the figures and exports see it."""

    number: int
    key: str
    genes: dict[str, GeneValue]
    outcome: str
    feasible: bool | None  # None: not recorded (an older artifact's constrained baseline)
    values: tuple[float, ...] | None
    generation: int = 0
    elapsed_s: float | None = None
    filler: bool = False
    quantiles: dict[str, float] = field(default_factory=dict)  # p50_ms, p95_ms, ... min/max
    samples_ms: tuple[float, ...] = ()
    resources: dict[str, int | None] = field(default_factory=dict)
    energy_j: float | None = None
    avg_power_w: float | None = None


@dataclass(frozen=True)
class Source:
    kind: str  # "journal" or "artifact"
    path: Path
    kernel: str
    problem: str
    device: str
    objectives: tuple[Objective, ...]
    points: tuple[Point, ...]
    baseline: Point | None
    front: tuple[Point, ...]
    pinned: str | None  # the artifact's pinned member; a journal records none
    defaults: dict[str, GeneValue]
    constraints: tuple[str, ...] = ()
    star: str | None = None  # the member the figures mark: pinned, or a journal's best

    @property
    def title(self) -> str:
        return f"{self.kernel} / {self.problem} ({self.device})"

    @property
    def stem(self) -> str:
        """What its figure files are called, ``<stem>-<figure>.png``: a journal by its own
        file name (one per search); an artifact, and the registry's copy of its journal, by
        kernel, problem and device class, since the registry files every artifact as
        ``<device-class>.json`` (its journal as ``.jsonl.gz``) and a name taken from that
        file would be every kernel's on the device class (a copy's ends in ``-journal``:
        its figures are not the artifact's)."""
        from ctune.search import journal_copy

        if self.kind == "artifact":
            return f"{self.kernel}-{self.problem}-{self.device}"
        if journal_copy.is_copy(self.path):
            device_class = self.path.name.removesuffix(journal_copy.SUFFIX)
            return f"{self.kernel}-{self.problem}-{device_class}-journal"
        return self.path.stem or "ctune"

    @property
    def star_label(self) -> str:
        if self.kind == "artifact":
            return "pinned"
        return f"best {self.objectives[0].name} (search values)"


def non_dominated(points: Sequence[Point], objectives: Sequence[Objective]) -> list[Point]:
    """Feasible points no other feasible point dominates, in input order."""
    dirs = [o.direction for o in objectives]
    feasible = [p for p in points if p.feasible and p.values is not None]
    if not feasible:
        return []
    keep = mask_of(as_minimization([p.values for p in feasible], dirs))  # type: ignore[misc]
    return [p for p, k in zip(feasible, keep, strict=True) if k]


# --- reading ---------------------------------------------------------------------------------


def _quantiles(m: Measurement | None) -> dict[str, float]:
    if m is None or m.summary is None:
        return {}
    s = m.summary
    return {
        "p50_ms": s.p50_ms,
        "p95_ms": s.p95_ms,
        "p99_ms": s.p99_ms,
        "mean_ms": s.mean_ms,
        "min_ms": s.min_ms,
        "max_ms": s.max_ms,
    }


def _trial_point(trial: Trial, elapsed: float | None, filler: bool) -> Point:
    b, m = trial.build, trial.measurement
    resources: dict[str, int | None] = {}
    if b is not None:
        resources = {
            "regs": b.resources.regs,
            "spills_bytes": b.resources.spills_bytes,
            "smem_bytes": b.resources.smem_bytes,
        }
    return Point(
        number=trial.number,
        key=trial.candidate.key(),
        genes=trial.candidate.as_dict(),
        outcome=trial.outcome.value,
        feasible=trial.feasible,
        values=tuple(trial.values) if trial.values is not None else None,
        generation=trial.generation,
        elapsed_s=elapsed,
        filler=filler,
        quantiles=_quantiles(m),
        samples_ms=tuple(m.samples_ms) if m is not None else (),
        resources=resources,
        energy_j=m.energy_j if m is not None else None,
        avg_power_w=m.avg_power_w if m is not None else None,
    )


def _header_objectives(header: Mapping[str, Any]) -> tuple[Objective, ...]:
    from ctune.objective.spec import parse_objective

    texts = (header.get("objectives") or {}).get("objectives") or []
    out = []
    for text in texts:
        try:
            o = parse_objective(str(text))
        except UserError:  # a term this ctune no longer knows: keep its name
            out.append(Objective(str(text), "min", ""))
            continue
        out.append(Objective(o.text, o.direction, o.unit))
    return tuple(out)


def load_journal(path: Path) -> Source:
    from ctune.search import journal

    replay, _ = journal.read(path)
    header = replay.header
    defaults = {
        str(g["name"]): g["default"]
        for g in (header.get("space") or {}).get("genes", [])
        if isinstance(g, dict) and "name" in g
    }
    points = tuple(
        _trial_point(
            t,
            replay.elapsed_s[i] if i < len(replay.elapsed_s) else None,
            t.candidate.key() in replay.fillers,
        )
        for i, t in enumerate(replay.trials)
    )
    objectives = _header_objectives(header)
    if not points:
        raise UserError(f"{path}: the journal holds no evaluations yet; nothing to plot")
    baseline = next((p for p in points if p.genes == defaults), points[0])
    front = tuple(non_dominated(points, objectives))
    best = None
    if front:
        first = objectives[0].direction
        sign = -1.0 if first == "max" else 1.0
        best = min(front, key=lambda p: sign * (p.values or (0.0,))[0]).key
    return Source(
        kind="journal",
        path=Path(path),
        kernel=str(header.get("kernel", "?")),
        problem=str(header.get("problem", "?")),
        device=str(header.get("device", "unknown device")),
        objectives=objectives,
        points=points,
        baseline=baseline,
        front=front,
        pinned=None,
        defaults=defaults,
        constraints=tuple(
            str(c) for c in (header.get("objectives") or {}).get("constraints") or []
        ),
        star=best,
    )


def _member_point(number: int, m: Any, feasible: bool | None) -> Point:
    summary = dict(m.summary)
    quantiles = {
        k: float(summary[k])
        for k in ("p50_ms", "p95_ms", "p99_ms", "mean_ms")
        if isinstance(summary.get(k), (int, float))
    }
    if m.samples_ms:
        quantiles["min_ms"], quantiles["max_ms"] = min(m.samples_ms), max(m.samples_ms)
    return Point(
        number=number,
        key=m.key,
        genes=m.candidate.as_dict(),
        outcome="ok",
        feasible=feasible,
        values=tuple(m.values),
        quantiles=quantiles,
        samples_ms=tuple(m.samples_ms),
        resources=dict(m.resources),
        energy_j=summary.get("energy_j"),
        avg_power_w=summary.get("avg_power_w"),
    )


def _baseline_feasible(a: Any, constraints: tuple[str, ...], where: str) -> bool | None:
    """Whether the default build met the search's constraints: as the artifact records it,
    else yes without constraints or on the front (every member meets them), else not known
    (None: an artifact from before the record)."""
    from ctune.registry.extensions import recorded_baseline_feasible

    recorded = recorded_baseline_feasible(a, where)
    if recorded is not None:
        return recorded
    if not constraints or any(m.key == a.baseline.key for m in a.front):
        return True
    return None


def load_artifact(path: Path) -> Source:
    from ctune.errors import RegistryError
    from ctune.registry.extensions import recorded_objectives
    from ctune.registry.store import read_result

    try:
        a = read_result(path)
        # the figure's title states the constraints: a malformed record is refused, not dropped
        constraints = recorded_objectives(a, str(path))[1]
        baseline_feasible = _baseline_feasible(a, constraints, str(path))
    except RegistryError as exc:
        raise UserError(str(exc)) from None
    front = tuple(_member_point(i, m, True) for i, m in enumerate(a.front))
    baseline = _member_point(len(front), a.baseline, baseline_feasible)
    return Source(
        kind="artifact",
        path=Path(path),
        kernel=a.kernel,
        problem=a.problem,
        device=a.device_class,
        objectives=tuple(Objective(o.name, o.direction, o.unit) for o in a.objectives),
        points=(*front, baseline),
        baseline=baseline,
        front=front,
        pinned=a.pinned,
        defaults=a.baseline.candidate.as_dict(),
        constraints=constraints,
        star=a.pinned,
    )


def load(path: Path) -> Source:
    """A journal (JSON Lines with a header, or the registry's gzip copy of one) or an
    artifact / result file (one JSON object)."""
    from ctune.search.journal import is_journal_path

    if is_journal_path(path):
        return load_journal(path)
    start = read_head(path, 4096, "plot source")
    first = start.split(b"\n", 1)[0]
    try:
        head = json.loads(first.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        head = None
    if isinstance(head, dict) and "kind" in head:  # a journal record: the reader names any damage
        return load_journal(path)
    if start.lstrip().startswith(b"{"):
        return load_artifact(path)
    raise UserError(f"{path}: neither a ctune journal nor a result file")


# --- series ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Convergence:
    """One objective over the search: every feasible value and the best so far."""

    objective: Objective
    numbers: list[int]  # evaluation numbers of the feasible points
    elapsed_s: list[float | None]
    values: list[float]
    best: list[float]  # best so far at each feasible point


def convergence(source: Source) -> list[Convergence]:
    out = []
    for i, o in enumerate(source.objectives):
        numbers, elapsed, values, best = [], [], [], []
        current: float | None = None
        for p in source.points:
            if not p.feasible or p.values is None:
                continue
            v = p.values[i]
            if current is None or sign(o.direction) * v < sign(o.direction) * current:
                current = v
            numbers.append(p.number)
            elapsed.append(p.elapsed_s)
            values.append(v)
            best.append(current)
        out.append(Convergence(o, numbers, elapsed, values, best))
    return out


def sensitivity(source: Source, objective: int = 0) -> dict[str, dict[str, list[float]]]:
    """gene -> value (as text, in the gene's order of appearance) -> the objective's
    feasible values; only genes seen with more than one value."""
    table: dict[str, dict[str, list[float]]] = {}
    for p in source.points:
        if not p.feasible or p.values is None:
            continue
        for gene, value in p.genes.items():
            table.setdefault(gene, {}).setdefault(str(value), []).append(p.values[objective])
    return {g: dict(_ordered(vs)) for g, vs in table.items() if len(vs) > 1}


def _ordered(values: dict[str, list[float]]) -> list[tuple[str, list[float]]]:
    def sort_key(item: tuple[str, list[float]]) -> tuple[int, float, str]:
        try:
            return (0, float(item[0]), item[0])
        except ValueError:
            return (1, 0.0, item[0])

    return sorted(values.items(), key=sort_key)


def distribution(source: Source) -> list[tuple[Point, bool]]:
    """The front (the marked member first) and the baseline, ``True`` for the baseline."""
    front = sorted(source.front, key=lambda p: p.key != source.star)
    members = [(p, False) for p in front]
    if source.baseline is not None and all(p.key != source.baseline.key for p in front):
        members.append((source.baseline, True))
    return members


# --- export ------------------------------------------------------------------------------------


def rows(source: Source) -> tuple[list[str], list[dict[str, Any]]]:
    """The table ``--as csv`` writes: one row per point, genes as columns."""
    genes = list(source.defaults) or sorted({g for p in source.points for g in p.genes})
    measured = [
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "energy_j",
        "avg_power_w",
        "regs",
        "spills_bytes",
        "smem_bytes",
    ]
    named = objective_columns((o.name, o.unit) for o in source.objectives)
    fixed = [
        "number",
        "generation",
        "key",
        "outcome",
        "feasible",
        "baseline",
        "front",
        "pinned",
        "filler",
        "elapsed_s",
        *extra_columns(named, measured),
        *measured,
    ]
    columns = gene_columns(genes, fixed)
    header = [*fixed, *columns.values()]
    front = {p.key for p in source.front}
    base = source.baseline.key if source.baseline is not None else None
    out = []
    for p in source.points:
        row: dict[str, Any] = {
            "number": p.number,
            "generation": p.generation,
            "key": p.key,
            "outcome": p.outcome,
            "feasible": p.feasible,
            "baseline": p.key == base,
            "front": p.key in front,
            "pinned": p.key == source.pinned,
            "filler": p.filler,
            "elapsed_s": p.elapsed_s,
            "energy_j": p.energy_j,
            "avg_power_w": p.avg_power_w,
        }
        for q in ("p50_ms", "p95_ms", "p99_ms"):
            row[q] = p.quantiles.get(q)
        for r in ("regs", "spills_bytes", "smem_bytes"):
            row[r] = p.resources.get(r)
        fill_objectives(row, named, p.values if p.values is not None else [None] * len(named))
        for g, column in columns.items():
            row[column] = p.genes.get(g)
        out.append(row)
    return header, out


__all__ = [
    "Convergence",
    "Objective",
    "Point",
    "Source",
    "convergence",
    "distribution",
    "load",
    "load_artifact",
    "load_journal",
    "non_dominated",
    "rows",
    "sensitivity",
]
