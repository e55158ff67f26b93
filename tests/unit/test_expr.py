"""The safe evaluator: what it computes, and everything it refuses."""

from pathlib import Path

import pytest

from ctune import expr
from ctune.expr import ExprError, parse


@pytest.mark.parametrize(
    ("source", "env", "expected"),
    [
        ("ceil_div(N, 128)", {"N": 1000}, 8),
        ("ceil_div(N, 128)", {"N": 1024}, 8),
        ("round_up(N, 64)", {"N": 65}, 128),
        ("STAGES * (BM + BN) * BK * 2", {"STAGES": 3, "BM": 128, "BN": 64, "BK": 32}, 36864),
        ("BM % (WM * 16) == 0", {"BM": 128, "WM": 4}, True),
        ("BM % (WM * 16) == 0", {"BM": 96, "WM": 4}, False),
        ("1 < A <= 4", {"A": 4}, True),
        ("x if c else y", {"x": 1, "y": 2, "c": 0}, 2),
        ("is_pow2(A) and not is_pow2(B)", {"A": 64, "B": 96}, True),
        ("log2(256)", {}, 8),
        ("min(A, 3) + max(A, 3) + abs(-2)", {"A": 5}, 10),
        (
            "4 * B * H * S * S * D / (2 if CAUSAL else 1)",
            {"B": 1, "H": 2, "S": 4, "D": 8, "CAUSAL": 1},
            512.0,
        ),
        ("1.0 / D ** 0.5", {"D": 64}, 0.125),
    ],
)
def test_evaluates(source, env, expected):
    assert parse(source).evaluate(env) == expected


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os').system('true')",
        "().__class__",
        "A.real",
        "A[0]",
        "open('x')",
        "lambda: 1",
        "[1, 2]",
        "'text'",
        "f(1)",
        "min(A, key=1)",
        "A = 1",
        "",
        "1 +",
        "x" * 2100,
    ],
)
def test_refuses(source):
    with pytest.raises(ExprError):
        parse(source)


def test_names_exclude_functions():
    assert parse("ceil_div(N, BLOCK) + M").names == frozenset({"N", "BLOCK", "M"})


@pytest.mark.parametrize(
    ("source", "env"),
    [("A / B", {"A": 1, "B": 0}), ("ceil_div(A, 0)", {"A": 1}), ("Q + 1", {}), ("2 ** 100", {})],
)
def test_runtime_errors_are_expr_errors(source, env):
    with pytest.raises(ExprError):
        parse(source).evaluate(env)


# --- bounded work ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("-" * 1900 + "BLOCK < 0", "nested deeper than 100 levels"),  # a RecursionError once
        ("not " * 490 + "A", "nested deeper than 100 levels"),
        ("1" + " + 1" * 200, "nested deeper than 100 levels"),
        ("2**" * 600 + "2", "nested deeper than 100 levels"),
        ("1" + "0" * 400, r"a number larger than 2\*\*1024"),
    ],
    ids=["1900-minus", "not-chain", "long-sum", "exponent-tower", "huge-literal"],
)
def test_refused_when_parsed(source: str, message: str) -> None:
    with pytest.raises(ExprError, match=message):
        parse(source)


@pytest.mark.parametrize(
    ("source", "env", "message"),
    [
        # the left operand grows while the exponent stays under the old cap of 64
        ("((((A**64)**64)**64)**64)**64", {"A": 2}, "a power larger than 2\\*\\*1024"),
        ("(A**64)**64", {"A": 2}, "a power larger than 2\\*\\*1024"),
        ("2 ** 2 ** 2 ** 2 ** 2", {}, "exponent too large"),
        ("A * A * A * A * A * A * A * A * A * A * A", {"A": 2**100}, "a product larger"),
        ("A + A", {"A": 2**1024}, "a value larger than 2\\*\\*1024"),
        ("S * 100000000", {"S": "row"}, "text cannot be multiplied"),
        ("100000000 * S", {"S": "row"}, "text cannot be multiplied"),
        ("int(X) * 2", {"X": float("inf")}, "cannot evaluate"),
    ],
)
def test_work_is_bounded_when_evaluated(source: str, env: dict, message: str) -> None:
    with pytest.raises(ExprError, match=message):
        parse(source).evaluate(env)


@pytest.mark.parametrize(
    ("source", "env", "expected"),
    [
        ("-" * 90 + "A", {"A": 3}, 3),
        ("1" + " + 1" * 90, {}, 91),
        ("A ** 64", {"A": 2}, 2**64),
        ("(A ** 8) ** 8", {"A": 2}, 2**64),
        ("A * B", {"A": 2**500, "B": 2**500}, 2**1000),
        ("1.5 ** 64", {}, 1.5**64),
        ("S == R", {"S": "row", "R": "row"}, True),
    ],
)
def test_what_fits_the_bounds_still_evaluates(source: str, env: dict, expected: object) -> None:
    assert parse(source).evaluate(env) == expected


def test_every_python_parse_in_ctune_goes_through_the_one_locked_parser() -> None:
    """ast.parse in two threads at once fails on CPython 3.11 (a search parses its
    fingerprint's code in a thread): expr.parse_python is the one place that calls it."""
    package = Path(expr.__file__).parent
    callers = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "ast.parse(" in path.read_text()
    ]
    assert callers == ["expr.py"]


def test_a_parse_that_lost_the_interpreters_race_is_retried(monkeypatch) -> None:
    """Python 3.11's traceback formatting parses in whatever thread logs an exception; a
    parse of ours that lost that race fails once with the counter's SystemError."""
    real, failures = expr.ast.parse, ["AST constructor recursion depth mismatch (before=1)"]

    def racing(text: str, mode: str = "exec"):
        if failures:
            raise SystemError(failures.pop())
        return real(text, mode=mode)

    monkeypatch.setattr(expr.ast, "parse", racing)
    assert isinstance(expr.parse_python("x = 1"), expr.ast.Module)

    def broken(text: str, mode: str = "exec"):
        raise SystemError("something else")

    monkeypatch.setattr(expr.ast, "parse", broken)
    with pytest.raises(SystemError, match="something else"):
        expr.parse_python("x = 1")
