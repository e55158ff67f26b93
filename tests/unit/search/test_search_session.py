"""The composition root: every entry point puts its search together through one
``SearchSession``, and what a session makes it also closes (docs/design.md, "The
composition root")."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.errors import UserError
from ctune.objective import parse_objective_spec
from ctune.search import session as session_mod
from ctune.search.driver import SearchOptions, run_search, run_session
from ctune.search.session import SearchSession
from ctune.spec import KernelSpec
from ctune.testing.searches import quiet_search
from ctune.testing.standins import StandInCompiler, StandInMeasurer, standin_spec


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    return standin_spec(tmp_path / "kernel")


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[SearchSession]:
    """Every session opened, in order."""
    seen: list[SearchSession] = []
    real = SearchSession.open

    def spy(self: SearchSession) -> Any:
        seen.append(self)
        return real(self)

    monkeypatch.setattr(SearchSession, "open", spy)
    return seen


class ClosingMeasurer(StandInMeasurer):
    """NOT A GPU: the stand-in, remembering that it was closed."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1


def test_the_entry_points_open_one_session_each(
    spec: KernelSpec, tmp_path: Path, opened: list[SearchSession]
) -> None:
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    compiler, measurer = StandInCompiler(spec), StandInMeasurer(samples=20)
    quiet_search(
        spec,
        objective,
        tmp_path / "quiet",
        strategy="random",
        budget=3,
        seed=1,
        compiler=compiler,
        measurer=measurer,
    )
    options = SearchOptions(budget=3, seed=1, confirm_processes=0, journal_fsync=False)
    run_search(
        Settings(cache_dir=tmp_path / "keywords"),
        spec,
        objective,
        options,
        compiler=compiler,
        measurer=measurer,
    )
    assert [s.options.strategy for s in opened] == ["random", None]
    assert all(s.compiler is compiler and s.measurer is measurer for s in opened)


def test_one_session_runs_again_with_other_options(spec: KernelSpec, tmp_path: Path) -> None:
    """A session is its inputs only: replaced options (a problem set's next shape) give
    another run, the parts shared."""
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    base = SearchSession(
        Settings(cache_dir=tmp_path),
        spec,
        objective,
        SearchOptions(budget=3, seed=1, confirm_processes=0, journal_fsync=False),
        compiler=StandInCompiler(spec),
        measurer=StandInMeasurer(samples=20),
    )
    first = run_session(dataclasses.replace(base, options=base.options))
    again = dataclasses.replace(base, options=dataclasses.replace(base.options, budget=5))
    second = run_session(again)
    assert (first.evaluations, second.evaluations) == (3, 5)


def test_a_refused_request_makes_no_part(
    spec: KernelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request is checked before any compiler or measurer is made."""
    made: list[str] = []
    monkeypatch.setattr(session_mod, "default_measurer", lambda cfg: made.append("measurer"))
    monkeypatch.setattr(
        session_mod, "default_compiler", lambda cfg, spec, tc: made.append("compiler")
    )
    session = SearchSession(
        Settings(cache_dir=tmp_path),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(strategy="no-such-strategy"),
        capabilities=frozenset({"gpu"}),
    )
    with pytest.raises(UserError), session.open():
        pass
    assert made == []


def test_the_parts_a_session_makes_are_closed(
    spec: KernelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A measurer the session made is closed when the run ends, also when it fails; one
    the caller gave is the caller's to close."""
    ClosingMeasurer.closed = 0
    monkeypatch.setattr(session_mod, "default_measurer", lambda cfg: ClosingMeasurer(samples=20))
    session = SearchSession(
        Settings(cache_dir=tmp_path),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(budget=3, seed=1, confirm_processes=0, journal_fsync=False),
        compiler=StandInCompiler(spec),
        capabilities=frozenset({"gpu"}),
    )
    with pytest.raises(RuntimeError), session.open() as inputs:
        assert isinstance(inputs.measurer, ClosingMeasurer)
        raise RuntimeError("the run failed")
    assert ClosingMeasurer.closed == 1
    given = ClosingMeasurer(samples=20)
    run_session(dataclasses.replace(session, measurer=given))
    assert ClosingMeasurer.closed == 1
