"""Parse ``--objective`` and ``--constraint`` text into one ObjectiveSpec.

One parser for both, so that every problem (an unknown term, a bad unit, contradicting
constraints, a metric the spec lacks) is one UserError line listing what is allowed.
``ObjectiveSpec.evaluate`` returns raw values in objective order (directions live in the
spec) and one violation per constraint, relative to its bound and > 0 when infeasible, so
constraints of different units can be summed. The syntax: docs/search.md, "Objectives
and constraints" (``ctune search --help`` shows the same).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.objective.terms import (
    ALIASES,
    TERMS,
    UNIT_TABLES,
    Direction,
    ObjectiveTerm,
    TermContext,
    get_term,
)
from ctune.records import Build, Measurement

if TYPE_CHECKING:
    from ctune.expr import Expr
    from ctune.measure import SamplingPlan

MAX_OBJECTIVES = 3  # exact hypervolume (stagnation, quality) is implemented up to 3-D
#: a violation reported when a constrained value cannot be known (cannot vouch for it)
UNKNOWN_VIOLATION = 1.0
_STRICT_EPS = 1e-9

_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_CONSTRAINT_RE = re.compile(
    rf"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op><=|>=|==|<|>|=)\s*"
    rf"(?P<num>{_NUMBER})\s*(?P<unit>\S(?:.*\S)?)?\s*$"
)
_PART_RE = re.compile(
    rf"^\s*(?:(?P<w1>{_NUMBER})\s*\*\s*(?P<n1>[A-Za-z_]\w*)"
    rf"|(?P<n2>[A-Za-z_]\w*)\s*\*\s*(?P<w2>{_NUMBER})"
    rf"|(?P<n3>[A-Za-z_]\w*))\s*$"
)


def allowed_terms() -> str:
    return ", ".join(TERMS)


def _term(name: str, where: str) -> ObjectiveTerm:
    term = get_term(name)
    if term is None:
        raise UserError(f"{where}: unknown term '{name}' (allowed: {allowed_terms()})")
    return term


def _fmt(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True, slots=True)
class Objective:
    """One objective: a term, or a positive weighted sum of same-direction terms."""

    parts: tuple[tuple[float, ObjectiveTerm], ...]

    @property
    def text(self) -> str:
        """Canonical text: ``p99`` or ``0.7*p50 + 0.3*p99``."""
        if len(self.parts) == 1 and self.parts[0][0] == 1.0:
            return self.parts[0][1].name
        return " + ".join(f"{_fmt(w)}*{t.name}" for w, t in self.parts)

    @property
    def name(self) -> str:
        """An identifier (registry objective names are identifiers)."""
        if len(self.parts) == 1 and self.parts[0][0] == 1.0:
            return self.parts[0][1].name
        body = "_".join(
            f"{_fmt(w).replace('.', 'p').replace('-', 'm')}_{t.name}" for w, t in self.parts
        )
        name = f"wsum_{body}"
        if len(name) > 64:
            from ctune.records import sha256_hex

            name = f"wsum_{sha256_hex(self.text)[:12]}"
        return name

    @property
    def direction(self) -> Direction:
        return self.parts[0][1].direction

    @property
    def unit(self) -> str:
        units = {t.unit for _, t in self.parts}
        return units.pop() if len(units) == 1 else "mixed"

    @property
    def needs(self) -> frozenset[str]:
        return frozenset().union(*(t.needs for _, t in self.parts))

    @property
    def quantile(self) -> float | None:
        qs = [t.quantile for _, t in self.parts if t.quantile is not None]
        return max(qs) if qs else None

    def value(
        self, build: Build | None, measurement: Measurement | None, context: TermContext
    ) -> float | None:
        total = 0.0
        for weight, term in self.parts:
            v = term.value(build, measurement, context)
            if v is None:
                return None
            total += weight * v
        return total

    def from_samples(self, samples_ms: Any, context: TermContext) -> Any:
        """The objective from latency samples alone, if every part is a sample statistic
        (a 2-D array of resamples gives one value per row)."""
        total: Any = 0.0
        for weight, term in self.parts:
            v = term.from_samples(samples_ms, context)
            if v is None:
                return None
            total += weight * v
        return total


@dataclass(frozen=True, slots=True)
class Constraint:
    """``term OP bound`` with the bound already in the term's unit."""

    term: ObjectiveTerm
    op: str  # one of <=, >=, <, >, ==
    bound: float
    text: str  # as the user wrote it, normalised: "power<=400W"

    def violation(self, value: float | None) -> float:
        """0 when satisfied; > 0 (relative to the bound) when not."""
        if value is None:
            return UNKNOWN_VIOLATION
        scale = abs(self.bound) if self.bound != 0 else 1.0
        b = self.bound
        if self.op == "<=":
            return max(0.0, (value - b) / scale)
        if self.op == ">=":
            return max(0.0, (b - value) / scale)
        if self.op == "<":
            return 0.0 if value < b else max((value - b) / scale, _STRICT_EPS)
        if self.op == ">":
            return 0.0 if value > b else max((b - value) / scale, _STRICT_EPS)
        return abs(value - b) / scale  # "=="


@dataclass(frozen=True)
class ObjectiveSpec:
    """Objectives + constraints; turns a build and its measurement into numbers."""

    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...] = ()
    metrics: Mapping[str, Expr] = field(default_factory=dict, compare=False, repr=False)

    @property
    def directions(self) -> tuple[Direction, ...]:
        return tuple(o.direction for o in self.objectives)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.objectives)

    @property
    def needs(self) -> frozenset[str]:
        """Capabilities every objective and constraint together need."""
        out: frozenset[str] = frozenset()
        for o in self.objectives:
            out |= o.needs
        for c in self.constraints:
            out |= c.term.needs
        return out

    @property
    def quantile(self) -> float | None:
        qs = [o.quantile for o in self.objectives] + [c.term.quantile for c in self.constraints]
        known = [q for q in qs if q is not None]
        return max(known) if known else None

    @property
    def energy(self) -> bool:
        return "nvml" in self.needs

    @property
    def measures(self) -> bool:
        """False when every term is a build property: then nothing runs on the GPU."""
        return "gpu" in self.needs

    def context(self, dims: Mapping[str, int]) -> TermContext:
        values: dict[str, float] = {}
        for name, expr in self.metrics.items():
            try:
                values[name] = float(expr.evaluate(dict(dims)))
            except Exception:  # ExprError / arithmetic: the term then reports None
                continue
        return TermContext(dict(dims), values)

    def evaluate(
        self, build: Build | None, measurement: Measurement | None, dims: Mapping[str, int]
    ) -> tuple[tuple[float, ...] | None, tuple[float, ...]]:
        """(values in objective order or None if any is unknown, violations per constraint)."""
        ctx = self.context(dims)
        raw = [o.value(build, measurement, ctx) for o in self.objectives]
        values = None if any(v is None for v in raw) else tuple(float(v) for v in raw)  # type: ignore[arg-type]
        violations = tuple(
            c.violation(c.term.value(build, measurement, ctx)) for c in self.constraints
        )
        return values, violations

    def sampling_plan(self, base: SamplingPlan) -> SamplingPlan:
        """``base`` with the quantile and energy the objectives need."""
        q = self.quantile
        return dataclasses.replace(
            base,
            quantile=max(base.quantile, q) if q is not None else base.quantile,
            energy=base.energy or self.energy,
        )

    def identity(self) -> dict[str, Any]:
        """What a journal header and an artifact record: texts, not objects."""
        return {
            "objectives": [o.text for o in self.objectives],
            "constraints": [c.text for c in self.constraints],
        }

    def describe(self) -> str:
        text = ", ".join(o.text for o in self.objectives)
        if self.constraints:
            text += " subject to " + ", ".join(c.text for c in self.constraints)
        return text

    def infos(self) -> list[dict[str, str]]:
        return [{"name": o.name, "direction": o.direction, "unit": o.unit} for o in self.objectives]


# --- parsing -----------------------------------------------------------------


def parse_objective(text: str) -> Objective:
    where = f"--objective {text!r}"
    if not text or not text.strip():
        raise UserError("--objective: empty (e.g. --objective p99)")
    parts: list[tuple[float, ObjectiveTerm]] = []
    for piece in re.split(r"(?<![eE])\+", text):
        match = _PART_RE.match(piece)
        if not match:
            if re.search(r"[A-Za-z_\d]\s*-", piece):
                raise UserError(
                    f"{where}: only positive weights and '+' are allowed (to trade terms "
                    "off against each other, give them as separate objectives)"
                )
            raise UserError(
                f"{where}: cannot read {piece.strip()!r}; write a term (p99) or a weighted sum "
                f"(0.7*p50 + 0.3*p99) of: {allowed_terms()}"
            )
        name = match.group("n1") or match.group("n2") or match.group("n3")
        raw_w = match.group("w1") or match.group("w2")
        weight = float(raw_w) if raw_w is not None else 1.0
        if not 0 < weight < math.inf:
            raise UserError(f"{where}: weights must be positive and finite, got {raw_w}")
        term = _term(name, where)
        if any(t.name == term.name for _, t in parts):
            raise UserError(f"{where}: term '{term.name}' appears twice")
        parts.append((weight, term))
    directions = {t.direction for _, t in parts}
    if len(directions) > 1:
        mins = [t.name for _, t in parts if t.direction == "min"]
        maxs = [t.name for _, t in parts if t.direction == "max"]
        raise UserError(
            f"{where}: cannot add terms to minimise ({', '.join(mins)}) and to maximise "
            f"({', '.join(maxs)}); give them as separate objectives"
        )
    return Objective(tuple(parts))


def _unit_factor(term: ObjectiveTerm, unit: str | None, where: str) -> float:
    table = UNIT_TABLES.get(term.unit, {term.unit: 1.0})
    if unit is None or unit == "":
        return 1.0  # a bare number is in the term's own unit
    if unit in table:
        return table[unit]
    folded = [u for u in table if u.lower() == unit.lower()]
    if len(folded) == 1:
        return table[folded[0]]
    raise UserError(
        f"{where}: unit '{unit}' does not fit {term.name} (allowed: {', '.join(table)}; "
        f"a bare number means {term.unit})"
    )


def parse_constraint(text: str) -> Constraint:
    where = f"--constraint {text!r}"
    match = _CONSTRAINT_RE.match(text or "")
    if not match:
        raise UserError(
            f"{where}: expected TERM OP NUMBER[UNIT], e.g. power<=400W, spills==0, p99<2ms "
            f"(OP: <= >= < > ==; terms: {allowed_terms()})"
        )
    term = _term(match.group("name"), where)
    op = "==" if match.group("op") == "=" else match.group("op")
    bound = float(match.group("num")) * _unit_factor(term, match.group("unit"), where)
    if not math.isfinite(bound):
        raise UserError(f"{where}: the bound {match.group('num')} is not a finite number")
    canonical = f"{term.name}{op}{match.group('num')}{match.group('unit') or ''}"
    return Constraint(term, op, bound, canonical)


def _check_consistent(constraints: Sequence[Constraint]) -> None:
    """Refuse constraints no value can satisfy (``p99>=2ms`` with ``p99<=1ms``)."""
    by_term: dict[str, list[Constraint]] = {}
    for c in constraints:
        by_term.setdefault(c.term.name, []).append(c)
    for cs in by_term.values():
        lo: tuple[float, bool, Constraint] | None = None  # (bound, open, source)
        hi: tuple[float, bool, Constraint] | None = None
        for c in cs:
            if c.op in (">=", ">", "=="):
                cand = (c.bound, c.op == ">", c)
                if lo is None or cand[0] > lo[0] or (cand[0] == lo[0] and cand[1]):
                    lo = cand
            if c.op in ("<=", "<", "=="):
                cand = (c.bound, c.op == "<", c)
                if hi is None or cand[0] < hi[0] or (cand[0] == hi[0] and cand[1]):
                    hi = cand
            if hi is not None and (hi[0] < 0 or (hi[0] == 0 and hi[1])):
                raise UserError(
                    f"--constraint {hi[2].text!r} can never hold: {c.term.name} is never negative"
                )
            if (
                lo is not None
                and hi is not None
                and (lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1])))
            ):
                a, b = lo[2].text, hi[2].text
                raise UserError(
                    f"--constraint {a!r} and --constraint {b!r} contradict each other "
                    f"(no value of {c.term.name} satisfies both)"
                )


def parse_objective_spec(
    objectives: Sequence[str],
    constraints: Sequence[str] = (),
    metrics: Mapping[str, Expr] | None = None,
) -> ObjectiveSpec:
    """Parse the CLI texts; ``metrics`` (the spec's) is checked when given."""
    if not objectives:
        raise UserError(f"give at least one --objective (terms: {allowed_terms()})")
    parsed = [parse_objective(t) for t in objectives]
    if len(parsed) > MAX_OBJECTIVES:
        raise UserError(
            f"{len(parsed)} objectives given; at most {MAX_OBJECTIVES} "
            "(combine others into a weighted sum, e.g. '0.5*p50 + 0.5*p99')"
        )
    seen: set[str] = set()
    for o in parsed:
        if o.text in seen:
            raise UserError(f"--objective {o.text!r} is given twice")
        seen.add(o.text)
    cons = [parse_constraint(t) for t in constraints]
    _check_consistent(cons)
    if metrics is not None:
        terms = [t for o in parsed for _, t in o.parts] + [c.term for c in cons]
        for term in terms:
            needed = term.requires_metric
            if needed and needed not in metrics:
                have = ", ".join(sorted(metrics)) or "none"
                alt = getattr(term, "without_metric", None)
                hint = f", or use '{alt}', which needs none" if alt else ""
                raise UserError(
                    f"term '{term.name}' needs a '{needed}' metric in the kernel spec "
                    f"(metrics: {{{needed}: EXPR}}){hint}; this spec has: {have}"
                )
    return ObjectiveSpec(tuple(parsed), tuple(cons), dict(metrics or {}))


def help_text() -> str:
    """The term table for ``--help``."""
    rows = [f"{t.name} ({t.direction}, {t.unit})" for t in TERMS.values()]
    aliases = ", ".join(f"{a}={b}" for a, b in ALIASES.items())
    return "terms: " + "; ".join(rows) + f". aliases: {aliases}."


__all__ = [
    "MAX_OBJECTIVES",
    "UNKNOWN_VIOLATION",
    "Constraint",
    "Objective",
    "ObjectiveSpec",
    "help_text",
    "parse_constraint",
    "parse_objective",
    "parse_objective_spec",
]
