"""Ctrl-C while the search confirms: the rounds measured are journaled, and --resume takes
them back instead of measuring them again (stand-ins; the real CLI and worker processes
are tests/unit/cli/test_interrupts.py)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctune.search.journal import read
from ctune.spec import KernelSpec
from ctune.testing.standins import StandInCompiler, StandInMeasurer


def test_first_ctrl_c_finishes_the_round_in_flight_and_journals_it(search) -> None:
    before = signal.getsignal(signal.SIGINT)
    measurer = StandInMeasurer(samples=30, sigint_at_round=2)
    result, _, _, events = search(budget=12, seed=5, measurer=measurer, confirm_processes=8)
    assert signal.getsignal(signal.SIGINT) is before
    assert result.interrupted and result.artifact_path is None  # nothing unconfirmed pinned
    assert measurer.processes == 2 and result.confirmation_rounds == 2
    replay, _ = read(result.journal)
    assert [r.round for r in replay.rounds] == [1, 2]
    assert all(r.trials == len(replay.trials) == 12 for r in replay.rounds)
    journaled = {key for r in replay.rounds for key in r.runs}
    assert journaled == set(measurer.remeasured)  # every measurement taken is on disk
    assert any("interrupted while confirming" in getattr(e, "message", "") for e in events)

    again = StandInMeasurer(samples=30)
    resumed, _, _, _ = search(budget=12, seed=5, measurer=again, resume=result.journal)
    assert not resumed.interrupted and again.calls == []  # no trial measured again
    assert resumed.confirmation is not None
    assert resumed.confirmation.processes == again.processes + 2  # rounds 1-2 taken back
    rounds = read(result.journal)[0].rounds
    assert [r.round for r in rounds] == list(range(1, resumed.confirmation.processes + 1))


def test_ctrl_c_in_the_last_round_stops_and_writes_nothing(search, spec: KernelSpec) -> None:
    """The last round (the limit, 5) answers a Ctrl-C as any other: it finishes and is
    journaled, the search stops interrupted and writes no result; --resume takes the five
    rounds back and then writes it."""
    measurer = StandInMeasurer(samples=30, sigint_at_round=5)
    compiler = StandInCompiler(spec, fail_every=None)
    plan = {"budget": 20, "seed": 2, "confirm_processes": 5}
    result, _, _, events = search(measurer=measurer, compiler=compiler, **plan)
    assert measurer.processes == 5  # the round in flight was the last one
    assert result.interrupted and result.stop_reason == "interrupted"
    assert result.artifact_path is None and result.confirmation is not None
    assert result.confirmation.stopped == "interrupted"
    assert [r.round for r in read(result.journal)[0].rounds] == [1, 2, 3, 4, 5]
    assert any(
        "the round in flight finished; 5 round(s)" in getattr(e, "message", "") for e in events
    )
    again = StandInMeasurer(samples=30)
    resumed, _, _, _ = search(measurer=again, compiler=compiler, resume=result.journal, **plan)
    assert not resumed.interrupted and resumed.artifact_path is not None
    assert again.processes == 0 and again.calls == []  # all five rounds taken back


def test_ctrl_c_after_the_rounds_before_the_result_stops(
    search, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C that comes once the rounds have ended, while the result is being made,
    is not acknowledged and then ignored: the search stops, interrupted, writing nothing."""
    from ctune.search import feasibility

    analyze = feasibility.analyze
    signals: list[int] = []

    def interrupted_analyze(*args: Any, **kwargs: Any) -> Any:
        if not signals:
            signals.append(signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs right here
        return analyze(*args, **kwargs)

    monkeypatch.setattr(feasibility, "analyze", interrupted_analyze)
    result, measurer, _, _ = search(budget=12, seed=5, confirm_processes=5)
    assert signals and measurer.processes > 0  # it came after the confirmation
    assert result.interrupted and result.artifact_path is None


def test_second_ctrl_c_abandons_the_round_in_flight(search) -> None:
    measurer = StandInMeasurer(samples=30, sigint_at_round=2, sigints=2)
    result, _, _, events = search(budget=12, seed=5, measurer=measurer, confirm_processes=8)
    assert result.interrupted and result.confirmation_rounds == 1
    assert [r.round for r in read(result.journal)[0].rounds] == [1]
    assert any("round in flight was abandoned" in getattr(e, "message", "") for e in events)


def _edit_rounds(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    lines = path.read_text().splitlines()
    out = []
    for line in lines:
        record = json.loads(line)
        if record.get("kind") == "confirmation":
            edit(record)
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n")


def _of_other_trials(record: dict[str, Any]) -> None:
    record["trials"] = 11


def _of_other_members(record: dict[str, Any]) -> None:
    record["runs"].pop(sorted(record["runs"])[0])


@pytest.mark.parametrize("edit", [_of_other_trials, _of_other_members])
def test_rounds_of_another_confirmation_are_measured_again(search, edit) -> None:
    """Rounds journaled for other trials (the search went on after them), or for other
    members than this confirmation asks, are not taken back: they are measured afresh."""
    measurer = StandInMeasurer(samples=30, sigint_at_round=2)
    result, _, _, _ = search(budget=12, seed=5, measurer=measurer, confirm_processes=8)
    assert result.interrupted and result.confirmation_rounds == 2
    _edit_rounds(result.journal, edit)
    again = StandInMeasurer(samples=30)
    resumed, _, _, _ = search(budget=12, seed=5, measurer=again, resume=result.journal)
    assert resumed.confirmation is not None
    assert again.processes == resumed.confirmation.processes  # every round measured
