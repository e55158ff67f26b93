"""A few builds for many shapes: set cover over a (shape x build) matrix of measured times.

A serving engine ships a handful of kernels and a rule that picks one per shape, not one
kernel per shape. Given every finalist build measured on every shape it can run, this
picks the fewest builds such that each shape has one within ``margin`` of its per-shape
best (greedy set cover, builds already ``shipped`` taken first), and says which build
serves which shape. Cells are times; an absent cell is unmeasured (the cover refuses),
``None`` a measured failure. The rule in full: docs/dispatch.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ctune.errors import UserError

#: relative slack at the margin's edge, so that exact decimal ratios count as inside
EDGE_EPS = 1e-9
#: the build group of a column every shape may take (the vendor call runs on every dtype)
ANY_GROUP = "*"


@dataclass(frozen=True)
class Matrix:
    """Times of builds on shapes: ``cells[(shape, build)]`` (None: failed there)."""

    shapes: tuple[str, ...]
    builds: tuple[str, ...]
    cells: Mapping[tuple[str, str], float | None]
    shape_group: Mapping[str, str] = field(default_factory=dict)  # absent: group ""
    build_group: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(set(self.shapes)) != len(self.shapes) or len(set(self.builds)) != len(self.builds):
            raise UserError("dispatch matrix: shape and build names must be unique")
        for (shape, build), value in self.cells.items():
            if shape not in self.shapes or build not in self.builds:
                raise UserError(f"dispatch matrix: cell ({shape}, {build}) names no row/column")
            if value is not None and not (math.isfinite(value) and value > 0):
                raise UserError(
                    f"dispatch matrix: cell ({shape}, {build}) = {value!r}; expected a "
                    "positive time or null (failed)"
                )

    def eligible(self, shape: str, build: str) -> bool:
        group = self.build_group.get(build, "")
        return group == ANY_GROUP or self.shape_group.get(shape, "") == group

    def value(self, shape: str, build: str) -> float | None:
        return self.cells.get((shape, build))

    def missing(self) -> list[tuple[str, str]]:
        """Eligible (shape, build) pairs not measured yet, in matrix order."""
        return [
            (s, b)
            for s in self.shapes
            for b in self.builds
            if self.eligible(s, b) and (s, b) not in self.cells
        ]

    def best(self, shape: str) -> tuple[str, float] | None:
        """The fastest build on ``shape`` (ties: the earlier build), None if none ran."""
        found: tuple[str, float] | None = None
        for b in self.builds:
            v = self.cells.get((shape, b))
            if v is not None and self.eligible(shape, b) and (found is None or v < found[1]):
                found = (b, v)
        return found


def loss(value: float, best: float) -> float:
    """How much slower than the per-shape best, relative (0.03: 3 % slower)."""
    return value / best - 1.0


def covers(matrix: Matrix, margin: float) -> dict[str, frozenset[str]]:
    """Build -> the shapes it serves within ``margin`` of their best."""
    limit = margin + EDGE_EPS
    out: dict[str, set[str]] = {b: set() for b in matrix.builds}
    for s in matrix.shapes:
        best = matrix.best(s)
        if best is None:
            continue
        for b in matrix.builds:
            v = matrix.value(s, b)
            if v is not None and matrix.eligible(s, b) and loss(v, best[1]) <= limit:
                out[b].add(s)
    return {b: frozenset(v) for b, v in out.items()}


@dataclass(frozen=True)
class Cover:
    """The chosen builds (pick order), who serves each shape, and what it costs."""

    margin: float
    builds: tuple[str, ...]
    assignment: dict[str, str]  # shape -> build
    losses: dict[str, float]  # shape -> relative loss vs its per-shape best
    best: dict[str, str]  # shape -> its per-shape best build
    unservable: tuple[str, ...]  # shapes no build ran on
    shipped: tuple[str, ...] = ()  # chosen builds that were shipped already

    @property
    def max_loss(self) -> float:
        return max(self.losses.values(), default=0.0)


def greedy_cover(matrix: Matrix, margin: float, shipped: Collection[str] = frozenset()) -> Cover:
    """The greedy cover described in the module docstring; refuses a matrix with holes."""
    holes = matrix.missing()
    if holes:
        s, b = holes[0]
        raise UserError(
            f"dispatch matrix: {len(holes)} cell(s) not measured yet (first: build {b} on "
            f"{s}); measure every finalist on every shape first"
        )
    sets = covers(matrix, margin)
    bests = {s: matrix.best(s) for s in matrix.shapes}
    coverable = {s for s, b in bests.items() if b is not None}
    order = {b: i for i, b in enumerate(matrix.builds)}

    def gain(b: str, todo: set[str]) -> tuple[int, float, int]:
        new = sets[b] & todo
        spent = sum(_loss_at(matrix, s, b, bests) for s in new)
        return (-len(new), spent, order[b])

    chosen: list[str] = []
    todo = set(coverable)
    # shipped builds first (they cost nothing), then any build
    for pool in ([b for b in matrix.builds if b in shipped], matrix.builds):
        while free := [b for b in pool if b not in chosen and sets[b] & todo]:
            pick = min(free, key=lambda b: gain(b, todo))
            chosen.append(pick)
            todo -= sets[pick]
    # redundant builds leave, new ones first (latest first), then shipped ones
    for b in sorted(reversed(chosen), key=lambda c: c in shipped):
        rest = [c for c in chosen if c != b]
        if coverable <= set().union(*(sets[c] for c in rest)):
            chosen = rest
    cover = _assign(matrix, margin, tuple(chosen), bests)
    return dataclasses.replace(cover, shipped=tuple(b for b in chosen if b in shipped))


def _loss_at(
    matrix: Matrix, shape: str, build: str, bests: Mapping[str, tuple[str, float] | None]
) -> float:
    best = bests[shape]
    v = matrix.value(shape, build)
    assert best is not None and v is not None
    return loss(v, best[1])


def _assign(
    matrix: Matrix,
    margin: float,
    chosen: tuple[str, ...],
    bests: Mapping[str, tuple[str, float] | None],
) -> Cover:
    assignment: dict[str, str] = {}
    losses: dict[str, float] = {}
    for s in matrix.shapes:
        if bests[s] is None:
            continue
        ran = [(matrix.value(s, b), i, b) for i, b in enumerate(chosen)]
        _, _, build = min((v, i, b) for v, i, b in ran if v is not None)
        assignment[s] = build
        losses[s] = _loss_at(matrix, s, build, bests)
    return Cover(
        margin=margin,
        builds=chosen,
        assignment=assignment,
        losses=losses,
        best={s: b[0] for s, b in bests.items() if b is not None},
        unservable=tuple(s for s in matrix.shapes if bests[s] is None),
    )


def matrix_from_rows(
    rows: Sequence[Mapping[str, object]],
    shape_group: Mapping[str, str] | None = None,
    build_group: Mapping[str, str] | None = None,
) -> Matrix:
    """A matrix from ``{"shape", "build", "value"}`` rows, in first-seen order."""
    shapes: dict[str, None] = {}
    builds: dict[str, None] = {}
    cells: dict[tuple[str, str], float | None] = {}
    for row in rows:
        s, b, v = str(row["shape"]), str(row["build"]), row.get("value")
        shapes.setdefault(s)
        builds.setdefault(b)
        cells[s, b] = None if v is None else float(v)  # type: ignore[arg-type]
    return Matrix(
        tuple(shapes), tuple(builds), cells, dict(shape_group or {}), dict(build_group or {})
    )


__all__ = [
    "ANY_GROUP",
    "EDGE_EPS",
    "Cover",
    "Matrix",
    "covers",
    "greedy_cover",
    "loss",
    "matrix_from_rows",
]
