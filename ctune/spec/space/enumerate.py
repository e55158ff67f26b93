"""Valid assignments of the restricted genes, found by depth-first search with pruning.

Filtering the full product of the restricted genes evaluates every restriction per
combination, too slow for a space such as the CUTLASS GEMM's (docs/spec-format.md). Here
each derived value and restriction is evaluated as soon as its genes are assigned, so a
broken prefix prunes every combination below it; independent gene groups are counted apart
and multiplied. The result is the same as filtering the product in spec order, including a
derived value that cannot be evaluated, which makes a combination invalid.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from ctune.expr import Expr, ExprError
from ctune.records import GeneValue


@dataclass(frozen=True, slots=True)
class Check:
    """A derived value to compute (``name`` set) or a restriction to test (``name`` None)."""

    expr: Expr
    deps: frozenset[str]  # restricted genes it depends on, through derived values
    name: str | None = None


#: draws of the estimate past the walk's budget: a search announces the number as "about"
#: and computes it in a thread while its first builds start, where more draws only held the
#: GIL longer (the CUTLASS GEMM's: 2.6% from a 500,000-draw estimate, in a fifth of its time)
ESTIMATE_SAMPLES = 100_000


class _OverBudget(Exception):
    """The walk visited more nodes than allowed: the caller estimates instead."""


def checks_of(
    restrictions: Sequence[Expr],
    derived: Sequence[tuple[str, Expr]],
    genes: frozenset[str],
) -> list[Check]:
    """Derived values (in declared order) and restrictions with their gene dependencies."""
    deps: dict[str, frozenset[str]] = {}
    out: list[Check] = []
    for name, expr in derived:
        found = frozenset(n for n in expr.names if n in genes).union(
            *(deps.get(n, frozenset()) for n in expr.names)
        )
        deps[name] = found
        out.append(Check(expr, found, name))
    for expr in restrictions:
        found = frozenset(n for n in expr.names if n in genes).union(
            *(deps.get(n, frozenset()) for n in expr.names)
        )
        out.append(Check(expr, found))
    return out


def _passes(checks: Sequence[Check], env: dict[str, GeneValue]) -> bool:
    for check in checks:
        try:
            value = check.expr.evaluate(env)
        except ExprError:
            return False
        if check.name is not None:
            env[check.name] = value
        elif not value:
            return False
    return True


class Walk:
    """Depth-first assignment of ``genes`` (in order) under ``checks``."""

    def __init__(
        self,
        names: Sequence[str],
        values: Sequence[Sequence[GeneValue]],
        checks: Sequence[Check],
        env: Mapping[str, GeneValue],
    ) -> None:
        self.names = tuple(names)
        self.values = tuple(tuple(v) for v in values)
        position = {n: i for i, n in enumerate(self.names)}
        self.at: list[list[Check]] = [[] for _ in self.names]
        self.before: list[Check] = []
        for check in checks:
            level = max((position[d] for d in check.deps if d in position), default=-1)
            (self.at[level] if level >= 0 else self.before).append(check)
        self.env = dict(env)
        self.nodes = 0

    def count(self, budget: int) -> int:
        """How many complete assignments pass every check (raises past ``budget`` nodes)."""
        env = dict(self.env)
        if not _passes(self.before, env):
            return 0
        return self._count(0, env, budget) if self.names else 1

    def _count(self, depth: int, env: dict[str, GeneValue], budget: int) -> int:
        name, checks, last = self.names[depth], self.at[depth], depth == len(self.names) - 1
        total = 0
        for value in self.values[depth]:
            self.nodes += 1
            if self.nodes > budget:
                raise _OverBudget
            env[name] = value
            if not _passes(checks, env):
                continue
            total += 1 if last else self._count(depth + 1, env, budget)
        return total

    def assignments(self) -> Iterator[tuple[GeneValue, ...]]:
        """Every passing assignment, in product order (last gene fastest)."""
        env = dict(self.env)
        if not _passes(self.before, env):
            return
        if not self.names:
            yield ()
            return
        yield from self._assign(0, env, [])

    def _assign(
        self, depth: int, env: dict[str, GeneValue], prefix: list[GeneValue]
    ) -> Iterator[tuple[GeneValue, ...]]:
        name, checks, last = self.names[depth], self.at[depth], depth == len(self.names) - 1
        for value in self.values[depth]:
            env[name] = value
            if not _passes(checks, env):
                continue
            prefix.append(value)
            if last:
                yield tuple(prefix)
            else:
                yield from self._assign(depth + 1, env, prefix)
            prefix.pop()


def groups(names: Sequence[str], checks: Sequence[Check]) -> list[list[str]]:
    """Genes linked by a shared check, each group in the given order (union-find)."""
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for check in checks:
        linked = sorted(d for d in check.deps if d in parent)
        for other in linked[1:]:
            parent[root(other)] = root(linked[0])
    by_root: dict[str, list[str]] = {}
    for n in names:
        by_root.setdefault(root(n), []).append(n)
    return list(by_root.values())


def count(
    names: Sequence[str],
    values: Mapping[str, Sequence[GeneValue]],
    checks: Sequence[Check],
    env: Mapping[str, GeneValue],
    budget: int,
) -> tuple[int, bool]:
    """(valid assignments of ``names``, exact?); estimated by sampling past ``budget`` nodes
    (at most ``ESTIMATE_SAMPLES`` draws)."""
    start = dict(env)
    if not _passes([c for c in checks if not c.deps], start):
        return 0, True
    linked = [c for c in checks if c.deps]
    total, used = 1, 0
    for group in groups(names, linked):
        members = set(group)
        walk = Walk(
            group, [values[n] for n in group], [c for c in linked if c.deps <= members], start
        )
        try:
            total *= walk.count(budget - used)
        except _OverBudget:
            return _estimate(names, values, checks, env, min(budget, ESTIMATE_SAMPLES)), False
        used += walk.nodes
    return total, True


def _estimate(
    names: Sequence[str],
    values: Mapping[str, Sequence[GeneValue]],
    checks: Sequence[Check],
    env: Mapping[str, GeneValue],
    samples: int,
) -> int:
    """Valid fraction of ``samples`` uniform draws (seeded) times the product's size."""
    rng = random.Random(0)
    size = math.prod(len(values[n]) for n in names)
    hits = 0
    for _ in range(max(1, samples)):
        trial = dict(env)
        trial.update({n: rng.choice(values[n]) for n in names})
        hits += _passes(checks, trial)
    return round(hits / max(1, samples) * size)


__all__ = ["Check", "Walk", "checks_of", "count", "groups"]
