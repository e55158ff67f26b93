"""The safe evaluator: what it computes, and everything it refuses."""

import pytest

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
