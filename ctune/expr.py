"""A small, safe evaluator for the expressions in kernel specs.

Restrictions, derived values, launch rules, scalar argument values and metric
formulas are written as Python-like expressions. They are parsed with
:mod:`ast` and walked by hand over an allowlist of node types: names,
numbers, arithmetic, comparisons, boolean logic, conditional expressions and a
few named functions. ``eval()`` is never used, so a spec cannot run code.

The work is bounded too: an expression is at most ``MAX_CHARS`` long and ``MAX_DEPTH``
levels deep (the evaluator recurses), and no integer it computes may exceed
``MAX_INT_BITS`` bits (checked before a power or a product is computed, so ``(2**64)**64``
nested a few times is refused instead of filling memory); text is never repeated.
"""

from __future__ import annotations

import ast
import math
import operator
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

Number = int | float

#: characters of one expression
MAX_CHARS = 2000
#: levels of nesting: operators, calls and conditionals inside each other
MAX_DEPTH = 100
#: the largest integer an expression may hold or compute (about 1.8e308, where floats end)
MAX_INT_BITS = 1024
#: the largest exponent of ``**``
MAX_EXPONENT = 64


class ExprError(ValueError):
    """An expression is malformed, uses something not allowed, or cannot be evaluated."""


def _ceil_div(a: Number, b: Number) -> int:
    if b == 0:
        raise ExprError("ceil_div by zero")
    return -(-int(a) // int(b))


def _round_up(x: Number, m: Number) -> int:
    return _ceil_div(x, m) * int(m)


def _is_pow2(x: Number) -> bool:
    return isinstance(x, int) and x > 0 and (x & (x - 1)) == 0


def _log2(x: Number) -> float | int:
    if x <= 0:
        raise ExprError(f"log2 of {x}")
    return int(x).bit_length() - 1 if _is_pow2(x) else math.log2(x)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "ceil_div": _ceil_div,
    "round_up": _round_up,
    "min": min,
    "max": max,
    "abs": abs,
    "log2": _log2,
    "is_pow2": _is_pow2,
    "int": int,
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


@dataclass(frozen=True)
class Expr:
    """A parsed expression; evaluate it with :meth:`evaluate` against a name table."""

    source: str
    tree: ast.expr
    names: frozenset[str]

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        try:
            return _eval(self.tree, env)
        except ExprError:
            raise
        except ZeroDivisionError:
            raise ExprError(f"division by zero in '{self.source}'") from None
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise ExprError(f"cannot evaluate '{self.source}': {exc}") from None


def _bits(value: Any) -> int:
    """The size of an integer operand (0 for anything else: floats overflow on their own)."""
    return abs(value).bit_length() if isinstance(value, int) else 0


def _binop(op: ast.operator, left: Any, right: Any) -> Any:
    """One arithmetic step, refused before it runs when its result would be too large."""
    if isinstance(op, ast.Pow) and isinstance(right, (int, float)):
        if abs(right) > MAX_EXPONENT:
            raise ExprError(f"exponent too large (at most {MAX_EXPONENT})")
        grows = isinstance(right, int) and right > 0 and _bits(left) > 1
        if grows and (_bits(left) - 1) * right >= MAX_INT_BITS:
            raise ExprError(f"a power larger than 2**{MAX_INT_BITS}")
    if isinstance(op, ast.Mult):
        if isinstance(left, str) or isinstance(right, str):
            raise ExprError("text cannot be multiplied")
        if _bits(left) + _bits(right) > MAX_INT_BITS + 1:
            raise ExprError(f"a product larger than 2**{MAX_INT_BITS}")
    result = _BINOPS[type(op)](left, right)
    if _bits(result) > MAX_INT_BITS:
        raise ExprError(f"a value larger than 2**{MAX_INT_BITS}")
    return result


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise ExprError(f"unknown name '{node.id}'")
    if isinstance(node, ast.BinOp):
        return _binop(node.op, _eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, env))
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            result: Any = True
            for value in node.values:
                result = _eval(value, env)
                if not result:
                    return result
            return result
        result = False
        for value in node.values:
            result = _eval(value, env)
            if result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, env) else node.orelse, env)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)  # guaranteed by _check
        return FUNCTIONS[node.func.id](*(_eval(a, env) for a in node.args))
    raise ExprError(f"unsupported syntax {type(node).__name__}")  # pragma: no cover


_ALLOWED = (
    ast.Expression,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.And,
    ast.Or,
    *_BINOPS,
    *_UNARY,
    *_COMPARE,
)


def _depth(tree: ast.AST) -> int:
    """How deeply the expression's nodes nest, walked without recursion."""
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        todo += [(child, depth + 1) for child in ast.iter_child_nodes(node)]
    return deepest


def _check(tree: ast.AST, source: str) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ExprError(f"'{source}': {type(node).__name__} is not allowed in expressions")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool)):
            raise ExprError(f"'{source}': only numbers are allowed as literals")
        if isinstance(node, ast.Constant) and _bits(node.value) > MAX_INT_BITS:
            raise ExprError(f"'{source}': a number larger than 2**{MAX_INT_BITS}")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise ExprError(
                    f"'{source}': unknown function (allowed: {', '.join(sorted(FUNCTIONS))})"
                )
            if node.keywords:
                raise ExprError(f"'{source}': keyword arguments are not allowed")
        elif isinstance(node, ast.Name):
            names.add(node.id)
    called = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    return frozenset(names - called)


#: CPython 3.11 keeps ``ast.parse``'s recursion count per interpreter, not per thread: two
#: threads parsing at once fail with "AST constructor recursion depth mismatch"
_PARSING = threading.Lock()
#: the lock orders ctune's own parses; Python 3.11's traceback formatting parses too (its
#: caret anchors), in whatever thread logs an exception (Dask's do), so a parse that lost
#: that race is retried: the text is the same and the failure is the counter's, not ours
_RACE_RETRIES = 5


def parse_python(text: str, mode: str = "exec") -> ast.AST:
    """``ast.parse``, one thread at a time: every parse in ctune goes through here (a
    search computes its fingerprint in a thread while the main thread reads the spec)."""
    with _PARSING:
        for attempt in range(_RACE_RETRIES + 1):
            try:
                return ast.parse(text, mode=mode)
            except SystemError as exc:
                if "recursion depth mismatch" not in str(exc) or attempt == _RACE_RETRIES:
                    raise
    raise AssertionError("unreachable")  # the loop returns or raises


@lru_cache(maxsize=4096)
def parse(source: str | int | float) -> Expr:
    """Parse and validate once; raise :class:`ExprError` naming what is not allowed."""
    text = str(source).strip()
    if not text:
        raise ExprError("empty expression")
    if len(text) > MAX_CHARS:
        raise ExprError(f"expression longer than {MAX_CHARS} characters")
    try:
        tree = parse_python(text, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"'{text}': syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError):  # the parser's own stack
        raise ExprError(f"expression nested too deeply (at most {MAX_DEPTH} levels)") from None
    if _depth(tree) > MAX_DEPTH + 2:  # Expression and the operator nodes are not levels
        raise ExprError(f"expression nested deeper than {MAX_DEPTH} levels")
    names = _check(tree, text)
    assert isinstance(tree, ast.Expression)  # mode="eval"
    return Expr(text, tree.body, names)
