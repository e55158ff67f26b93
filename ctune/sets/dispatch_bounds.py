"""Which shapes a dispatch table's entry may serve: the dim ranges its build can run.

A build runs only the shapes of its compile group (the problem's defines, compiled in) whose
dims its genes satisfy the spec's restrictions at. Both are reduced, when the table is built,
to one closed range per dim and entry (``lo <= dim <= hi``), which the Python ``lookup`` and
the C++ header test alike:

- a define that is a dim's value in every problem of the set (by the same name first, else
  every dim equal to it in every problem) pins that dim to the entry's value; a define that
  is a function of the dtype pins nothing (the lookup matches the dtype); any other define
  pins every dim (the entry serves its own shape only, as the lookup cannot see the define);
- each restriction is evaluated with the build's genes: one that holds whatever the dims is
  dropped, and so is one that reads dims only (the shape's validity, not the build's);
  ``dim OP value`` (one dim against an expression of genes) bounds that dim; ``or`` and
  ``and`` are reduced operand by operand; anything else that still reads dims pins those
  dims to the entry's values (conservative: the entry serves fewer shapes).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctune.expr import Expr, ExprError

if TYPE_CHECKING:
    from ctune.spec import KernelSpec, Problem

#: no bound: the header's INT64_MIN / INT64_MAX
LOW, HIGH = -(2**63), 2**63 - 1
Bounds = tuple[tuple[int, int], ...]


class _NeedsDim(Exception):
    """An expression read a dim: its value depends on the shape."""


class _GeneEnv(Mapping[str, Any]):
    """Genes and derived values of one build; reading a dim raises :class:`_NeedsDim`."""

    def __init__(self, spec: KernelSpec, genes: Mapping[str, Any], dims: Sequence[str]) -> None:
        self._genes = {**spec.space.default_values(), **genes}
        self._derived = dict(spec.space.derived)
        self._dims = frozenset(dims)
        self._cache: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name in self._dims:
            raise _NeedsDim(name)
        if name in self._genes:
            return self._genes[name]
        if name not in self._cache:
            self._cache[name] = self._derived[name].evaluate(self)
        return self._cache[name]

    def __contains__(self, name: object) -> bool:
        return name in self._dims or name in self._genes or name in self._derived

    def __iter__(self) -> Iterator[str]:
        return iter({*self._genes, *self._derived})

    def __len__(self) -> int:
        return len(self._genes) + len(self._derived)


def _value(node: ast.expr, env: _GeneEnv) -> Any:
    """The node's value without the dims; raises :class:`_NeedsDim` where it reads one."""
    return Expr(ast.unparse(node), node, frozenset()).evaluate(env)


def _dims_read(node: ast.AST, spec: KernelSpec, dims: Sequence[str]) -> set[str]:
    """The dims a node reads, through the derived values it names."""
    return {n for n in _names_read(node, spec) if n in dims}


def _names_read(node: ast.AST, spec: KernelSpec) -> set[str]:
    """The dims and genes a node reads, through the derived values it names."""
    derived = dict(spec.space.derived)
    found: set[str] = set()
    todo = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in derived:
            todo += list(derived[name].names)
        else:
            found.add(name)
    return found


def _range(op: ast.cmpop, value: Any) -> tuple[int, int] | None:
    """``dim OP value`` as a closed integer range; None where it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(op, ast.LtE):
        return LOW, math.floor(value)
    if isinstance(op, ast.Lt):
        return LOW, math.ceil(value) - 1
    if isinstance(op, ast.GtE):
        return math.ceil(value), HIGH
    if isinstance(op, ast.Gt):
        return math.floor(value) + 1, HIGH
    if isinstance(op, ast.Eq) and value == int(value):
        return int(value), int(value)
    return None


_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq}


def _compare(node: ast.Compare, env: _GeneEnv) -> dict[str, tuple[int, int]] | None:
    """A comparison of one dim with an expression of genes as that dim's range."""
    if len(node.ops) != 1 or type(node.ops[0]) not in _FLIP:
        return None
    left, right, op = node.left, node.comparators[0], node.ops[0]
    if not isinstance(left, ast.Name) or left.id not in env._dims:
        left, right, op = right, left, _FLIP[type(op)]()
    if not isinstance(left, ast.Name) or left.id not in env._dims:
        return None
    try:
        found = _range(op, _value(right, env))
    except (_NeedsDim, ExprError):
        return None
    return {left.id: found} if found else None


def _constraints(
    node: ast.expr, env: _GeneEnv, spec: KernelSpec, dims: Sequence[str]
) -> list[dict[str, tuple[int, int]] | set[str]]:
    """What a restriction asks of the dims: ranges (dicts) and pinned dims (sets)."""
    try:
        _value(node, env)
        return []  # holds (or not) whatever the dims: the build ran its entry's shape
    except (_NeedsDim, ExprError):
        pass
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [c for v in node.values for c in _constraints(v, env, spec, dims)]
    if isinstance(node, ast.BoolOp):  # or: drop the operands false whatever the dims
        live = []
        for v in node.values:
            try:
                if _value(v, env):
                    return []
            except (_NeedsDim, ExprError):
                live.append(v)
        if len(live) == 1:
            return _constraints(live[0], env, spec, dims)
    if isinstance(node, ast.Compare):
        found = _compare(node, env)
        if found:
            return [found]
    return [_dims_read(node, spec, dims)]


def compiled_dims(
    problems: Sequence[Problem], dims: Sequence[str], dtypes: Sequence[str]
) -> set[str]:
    """The dims a set's compile groups fix (the module docstring's first rule)."""
    pinned: set[str] = set()
    for name in sorted({d for p in problems for d in p.defines}):
        values = [p.defines.get(name) for p in problems]
        bound = [
            d for d in dims if all(v == p.dims[d] for v, p in zip(values, problems, strict=True))
        ]
        if name in bound:
            pinned.add(name)
        elif bound:
            pinned.update(bound)
        elif len({(t, repr(v)) for t, v in zip(dtypes, values, strict=True)}) > len(set(dtypes)):
            pinned.update(dims)  # neither a dim nor the dtype: the lookup cannot see it
    return pinned


def entry_bounds(
    spec: KernelSpec,
    genes: Mapping[str, Any] | None,
    dims: Mapping[str, int],
    pinned: set[str],
) -> Bounds:
    """Each dim's range an entry may serve (``genes`` None: the vendor call, every shape)."""
    names = list(dims)
    lo = dict.fromkeys(names, LOW)
    hi = dict.fromkeys(names, HIGH)
    if genes is not None:
        env = _GeneEnv(spec, genes, names)
        for restriction in spec.space.restrictions:
            if _names_read(restriction.tree, spec) <= set(names):
                continue  # the shape's own validity, the same for every build: the caller's
            for c in _constraints(restriction.tree, env, spec, names):
                if isinstance(c, set):
                    pinned = pinned | c
                    continue
                for d, (a, b) in c.items():
                    lo[d], hi[d] = max(lo[d], a), min(hi[d], b)
        for d in pinned:
            lo[d], hi[d] = dims[d], dims[d]
    return tuple((lo[d], hi[d]) for d in names)


def serves(bounds: Bounds, dims: Sequence[int]) -> bool:
    """Whether an entry's ranges hold the shape (no bounds: every shape)."""
    return all(a <= x <= b for (a, b), x in zip(bounds, dims, strict=False))


__all__ = ["HIGH", "LOW", "Bounds", "compiled_dims", "entry_bounds", "serves"]
