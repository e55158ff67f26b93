"""Why the constraints left so little, and whether what they left is worth pinning.

Once the search is over this reads the trials and says, per constraint, how many measured
candidates break it, its term's measured range (with the baseline's value), and what
relaxing it would buy. ``dominated`` is True when the baseline breaks a constraint and
dominates every front member: then nothing allowed is worth deploying, and the search pins
nothing and ends inconclusive rather than pinning a worse build (docs/results.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ctune.objective.pareto import dominates, minimized, sign
from ctune.records import Build, Measurement, Trial

if TYPE_CHECKING:
    from ctune.objective.spec import Constraint, ObjectiveSpec


class Member(Protocol):
    """What the analysis reads of a confirmed member (``ctune.search.result.MemberResult``):
    its values, and the build and pooled measurement its constraints are judged on."""

    @property
    def values(self) -> tuple[float, ...]: ...
    @property
    def build(self) -> Build | None: ...
    @property
    def pooled(self) -> Measurement | None: ...


#: a constraint "rules out most candidates" above this share of the measured ones
MOST = 0.5


@dataclass(frozen=True)
class Relaxation:
    """The best candidate (first objective) that only this constraint rules out."""

    bound: float  # the bound that would admit it: its measured value of the term
    key: str
    values: tuple[float, ...]
    admits: int  # candidates ruled out by this constraint alone that the bound admits


@dataclass(frozen=True)
class ConstraintReport:
    text: str  # as the user wrote it, normalised: "power<=500W"
    term: str
    op: str
    unit: str
    measured: int  # candidates whose term value is known
    broken: int  # of those, how many break this constraint
    low: float | None  # measured range of the term
    high: float | None
    baseline: float | None  # the baseline's value of the term
    baseline_ok: bool
    relax: Relaxation | None

    def to_json(self) -> dict[str, Any]:
        relax = self.relax
        return {
            "constraint": self.text,
            "term": self.term,
            "unit": self.unit,
            "measured": self.measured,
            "broken": self.broken,
            "range": [self.low, self.high],
            "baseline": self.baseline,
            "baseline_ok": self.baseline_ok,
            "relax": None
            if relax is None
            else {
                "bound": relax.bound,
                "key": relax.key,
                "values": list(relax.values),
                "admits": relax.admits,
            },
        }


@dataclass(frozen=True)
class Feasibility:
    """Per-constraint evidence and the verdict on what the constraints left."""

    evaluated: int  # candidates with objective values (built and measured OK)
    infeasible: int  # of those, how many break at least one constraint
    baseline_feasible: bool
    constraints: tuple[ConstraintReport, ...]
    dominated: bool  # the baseline breaks a constraint and dominates every front member
    empty: bool  # nothing feasible was confirmed: no front at all

    @property
    def notable(self) -> bool:
        """Worth a report: a constraint ruled out the baseline or most candidates."""
        if not self.constraints:
            return False
        return (
            not self.baseline_feasible
            or self.empty
            or self.infeasible > MOST * max(1, self.evaluated)
        )

    @property
    def inconclusive(self) -> bool:
        """Nothing worth pinning: the front is empty or the baseline beats all of it."""
        return bool(self.constraints) and (self.dominated or self.empty)

    def to_json(self) -> dict[str, Any]:
        return {
            "evaluated": self.evaluated,
            "infeasible": self.infeasible,
            "baseline_feasible": self.baseline_feasible,
            "dominated": self.dominated,
            "empty": self.empty,
            "constraints": [c.to_json() for c in self.constraints],
        }


def loosened(op: str) -> str:
    """The operator of a relaxed bound: the measured value itself must pass it."""
    return {"<": "<=", ">": ">="}.get(op, op)


def _within(c: Constraint, value: float, bound: float) -> bool:
    if c.op in ("<=", "<"):
        return value <= bound
    if c.op in (">=", ">"):
        return value >= bound
    return value == bound


def _constraint_report(
    index: int,
    c: Constraint,
    term_values: Sequence[tuple[Trial, float | None]],
    baseline: Trial,
    baseline_value: float | None,
    directions: Sequence[str],
) -> ConstraintReport:
    known = [(t, v) for t, v in term_values if v is not None]
    broken = [t for t, _ in known if t.violations[index] > 0]
    only_this = [
        (t, v)
        for t, v in known
        if t.values is not None
        and t.violations[index] > 0
        and all(x <= 0 for i, x in enumerate(t.violations) if i != index)
    ]
    relax = None
    if only_this:
        best_t, best_v = only_this[0]
        for t, v in only_this[1:]:
            assert t.values is not None and best_t.values is not None
            if sign(directions[0]) * t.values[0] < sign(directions[0]) * best_t.values[0]:
                best_t, best_v = t, v
        assert best_t.values is not None
        admits = sum(_within(c, v, best_v) for _, v in only_this)
        relax = Relaxation(best_v, best_t.candidate.key(), tuple(best_t.values), admits)
    values = [v for _, v in known]
    return ConstraintReport(
        text=c.text,
        term=c.term.name,
        op=c.op,
        unit=c.term.unit,
        measured=len(known),
        broken=len(broken),
        low=min(values) if values else None,
        high=max(values) if values else None,
        baseline=baseline_value,
        baseline_ok=not (baseline.violations and baseline.violations[index] > 0),
        relax=relax,
    )


def analyze(
    trials: Sequence[Trial],
    objective: ObjectiveSpec,
    dims: Mapping[str, int],
    baseline: Trial,
    front: Sequence[Member],
    baseline_member: Member | None,
) -> Feasibility:
    """What the constraints did to this search (see the module docstring)."""
    ctx = objective.context(dims)
    scored = [t for t in trials if t.outcome.is_ok and t.values is not None]
    reports = []
    for i, c in enumerate(objective.constraints):
        term_values = [
            (t, c.term.value(t.build, t.measurement, ctx)) for t in scored if len(t.violations) > i
        ]
        base_value = c.term.value(baseline.build, baseline.measurement, ctx)
        reports.append(
            _constraint_report(i, c, term_values, baseline, base_value, objective.directions)
        )
    baseline_feasible = baseline.feasible
    if baseline_member is not None and baseline_member.pooled is not None:
        # the confirmation re-measured the baseline: its verdict is the one that counts
        _, violations = objective.evaluate(baseline_member.build, baseline_member.pooled, dims)
        baseline_feasible = baseline_feasible and all(v <= 0 for v in violations)
    base_values = baseline_member.values if baseline_member is not None else baseline.values
    directions = objective.directions
    dominated = bool(
        objective.constraints
        and not baseline_feasible
        and front
        and base_values
        and all(
            dominates(minimized(base_values, directions), minimized(m.values, directions))
            for m in front
        )
    )
    return Feasibility(
        evaluated=len(scored),
        infeasible=sum(not t.feasible for t in scored),
        baseline_feasible=baseline_feasible,
        constraints=tuple(reports),
        dominated=dominated,
        empty=not front,
    )


__all__ = ["ConstraintReport", "Feasibility", "Relaxation", "analyze", "loosened"]
