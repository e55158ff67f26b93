"""Every built-in term passes the objective-term contract."""

from __future__ import annotations

import pytest

from ctune.objective.terms import TERMS, ObjectiveTerm, get_term
from ctune.testing.contract_objective import ObjectiveTermContract


class TestBuiltinTerms(ObjectiveTermContract):
    @pytest.fixture(params=sorted(TERMS))
    def term(self, request: pytest.FixtureRequest) -> ObjectiveTerm:
        return TERMS[request.param]


@pytest.mark.parametrize(
    ("name", "needs"),
    [
        ("p99", {"gpu"}),
        ("energy", {"gpu", "nvml"}),
        ("power", {"gpu", "nvml"}),
        ("regs", set()),
        ("spills", set()),
        ("compile_time", set()),
        ("tflops", {"gpu"}),
    ],
)
def test_needs(name: str, needs: set[str]) -> None:
    assert get_term(name).needs == needs  # type: ignore[union-attr]


def test_unknown_term_is_none() -> None:
    assert get_term("no_such_term") is None
