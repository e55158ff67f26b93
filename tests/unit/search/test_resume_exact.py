"""--resume continues exactly: a search stopped anywhere (a Ctrl-C after the candidate in
flight, a crash that leaves the journal cut after any trial line) and resumed journals the
same trials, in the same order, and reaches the same front as the uninterrupted one, with
every built-in strategy (docs/journal-format.md, "Reading and resuming")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctune.search.journal import read
from ctune.search.result import SearchResult
from ctune.spec import KernelSpec
from ctune.testing.standins import StandInCompiler, StandInMeasurer

BUDGET = 30
SEED = 5
#: (strategy, objectives): each built-in strategy (staged is auto's for one objective)
STRATEGIES = [
    ("staged", ("p50",)),
    ("parzen", ("p50",)),
    ("ga", ("p50",)),
    ("random", ("p50",)),
    ("exhaustive", ("p50",)),
    ("nsga2", ("p50", "energy")),
]
#: the measurement during which Ctrl-C comes (the baseline's is the first)
CTRL_C_AT = (3, 7, 13, 22)
#: the trial lines a crash leaves in the journal
CRASH_AFTER = (2, 6, 11, 19, 27)


def _run(search: Any, spec: KernelSpec, objectives: tuple[str, ...], **options: Any) -> Any:
    """A search on the stand-ins whose builds never fail: the compiler's scripted failures
    go by request order, which a resume changes."""
    options.setdefault("measurer", StandInMeasurer(samples=30))
    return search(
        objectives,
        compiler=StandInCompiler(spec, fail_every=None),
        confirm_processes=0,
        write_result=False,
        jobs=1,
        **options,
    )[0]


def _trials(path: Path) -> list[tuple[str, str, int]]:
    """The journal's trials: candidate key, outcome, generation, in journal order."""
    replay, _ = read(path)
    return [(t.candidate.key(), t.outcome.value, t.generation) for t in replay.trials]


def _front(result: SearchResult) -> list[str]:
    return sorted(member.key for member in result.front)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _crashed(journal: Path, trials: int, where: Path) -> Path:
    """``journal`` as a crash leaves it after its first ``trials`` trial lines."""
    lines, kept = journal.read_text().splitlines(keepends=True), 0
    out: list[str] = []
    for line in lines:
        if json.loads(line)["kind"] == "trial":
            if kept == trials:
                break
            kept += 1
        out.append(line)
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text("".join(out))
    return where


def _mid_generation(path: Path) -> bool:
    """Whether the journal ends inside a generation: trials after its last record of one."""
    return _records(path)[-1]["kind"] == "trial"


@pytest.mark.parametrize(("strategy", "objectives"), STRATEGIES, ids=[s for s, _ in STRATEGIES])
def test_a_stopped_search_resumes_into_the_uninterrupted_one(
    search: Any, spec: KernelSpec, tmp_path: Path, strategy: str, objectives: tuple[str, ...]
) -> None:
    plan = {"strategy": strategy, "budget": BUDGET, "seed": SEED}
    whole = _run(search, spec, objectives, journal=tmp_path / "whole.jsonl", **plan)
    expected, front = _trials(whole.journal), _front(whole)
    assert whole.stop_reason in ("budget", "exhausted") and len(expected) > max(CRASH_AFTER)
    cut_short = 0
    for k in CTRL_C_AT:
        journal = tmp_path / f"ctrl-c-{k}.jsonl"
        stopped = _run(
            search,
            spec,
            objectives,
            journal=journal,
            measurer=StandInMeasurer(samples=30, sigint_at=k),
            **plan,
        )
        assert stopped.interrupted and len(read(journal)[0].trials) == k
        cut_short += _mid_generation(journal)
        resumed = _run(search, spec, objectives, resume=journal)
        assert _trials(resumed.journal) == expected, f"Ctrl-C during measurement {k}"
        assert _front(resumed) == front
    for k in CRASH_AFTER:
        journal = _crashed(whole.journal, k, tmp_path / f"crash-{k}.jsonl")
        cut_short += _mid_generation(journal)
        resumed = _run(search, spec, objectives, resume=journal)
        assert _trials(resumed.journal) == expected, f"a crash after {k} trial lines"
        assert _front(resumed) == front
    assert cut_short >= len(CTRL_C_AT)  # the stops fell inside generations


def test_a_generation_cut_short_is_neither_told_nor_recorded(
    search: Any, spec: KernelSpec, tmp_path: Path
) -> None:
    """Ctrl-C in the middle of a generation: its finished trials are journaled, and no
    generation record claims it finished; the resume asks it again and journals each
    candidate once, its journaled trials answering from the journal."""
    journal = tmp_path / "j.jsonl"
    measurer = StandInMeasurer(samples=30, sigint_at=5)
    stopped = _run(search, spec, ("p50",), journal=journal, measurer=measurer, budget=BUDGET)
    assert stopped.interrupted
    records = _records(journal)
    (generation,) = {r["trial"]["generation"] for r in records if r["kind"] == "trial"} - {0}
    assert not [r for r in records if r["kind"] == "generation"]
    again = StandInMeasurer(samples=30)
    resumed = _run(search, spec, ("p50",), resume=journal, measurer=again)
    assert not set(again.calls) & set(measurer.calls)  # nothing measured twice
    states = [r["generation"] for r in _records(resumed.journal) if r["kind"] == "generation"]
    assert states[0] == generation  # the generation asked again kept its number
    trials = _trials(resumed.journal)
    assert len({key for key, _, _ in trials}) == len(trials) == BUDGET
