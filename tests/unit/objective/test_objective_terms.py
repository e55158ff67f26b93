"""Every built-in term passes the objective-term contract; names are looked up cheaply."""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctune.objective import terms
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


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The ``importlib.metadata.entry_points`` scans made, by group, from a cold cache."""
    made: list[str] = []
    real = importlib.metadata.entry_points

    def counted(**kwargs: Any) -> Any:
        made.append(kwargs.get("group", ""))
        return real(**kwargs)

    monkeypatch.setattr(importlib.metadata, "entry_points", counted)
    terms._objective_entry_points.cache_clear()
    yield made
    terms._objective_entry_points.cache_clear()


def test_the_entry_points_are_scanned_once(scans: list[str]) -> None:
    """A name that is not built in (Kernel Tuner's ``time``) once scanned every installed
    distribution per lookup, 1.6 ms each: 34 s for a T4 file of 20,000 results."""
    for _ in range(50):
        assert get_term("time") is None
    assert scans == ["ctune.objectives"]


def test_a_t4_file_looks_its_objective_up_once(scans: list[str], tmp_path: Path) -> None:
    from ctune.exchange.t4 import read_t4

    results = [
        {"configuration": {"x": i}, "objectives": ["time"],
         "measurements": [{"name": "time", "value": float(i)}]}
        for i in range(200)
    ]  # fmt: skip
    path = tmp_path / "kt.json"
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    assert len(read_t4(path)) == 200 and len(scans) <= 1
