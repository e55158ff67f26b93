"""A warm start across --resume: it takes its share of the budget once, counting what the
journal holds; its configurations are part of the recorded plan, so a resume refuses other
ones, and needs them given again only while the warm start has not finished
(docs/search.md)."""

from __future__ import annotations

import random
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ctune.errors import UserError
from ctune.search.journal import read, read_header
from ctune.search.options import SearchOptions
from ctune.search.plan import new_plan, resume_plan
from ctune.spec import KernelSpec
from ctune.testing.standins import StandInCompiler, StandInMeasurer

BUDGET = 40  # a quarter of it: 10 of the 20 configurations are measured first
SOURCE = "earlier.json"


@pytest.fixture
def configurations(spec: KernelSpec) -> tuple[Mapping[str, Any], ...]:
    return tuple(spec.space.sample(random.Random(1), 20, spec.problem().dims))


def _run(search: Any, spec: KernelSpec, **options: Any) -> Any:
    """A search on stand-ins whose builds never fail (the compiler's scripted failures go
    by request order, which a resume changes)."""
    options.setdefault("measurer", StandInMeasurer(samples=30))
    result, *_ = search(
        compiler=StandInCompiler(spec, fail_every=None),
        confirm_processes=0,
        write_result=False,
        budget=BUDGET,
        **options,
    )
    return result


def _keys(path: Path) -> list[str]:
    return [t.candidate.key() for t in read(path)[0].trials]


def _warm(path: Path) -> int:
    """Trials of the warm start's generation, the first after the baseline."""
    return sum(1 for t in read(path)[0].trials if t.generation == 1)


def _warm_started(search: Any, spec: KernelSpec, warm: Any, journal: Path, **more: Any) -> Any:
    """The search these tests stop and resume: seed 5, warm-started from ``warm``."""
    return _run(
        search, spec, journal=journal, seed=5, warm_start=warm, warm_start_source=SOURCE, **more
    )


def _stopped(search: Any, spec: KernelSpec, warm: Any, at: int, journal: Path) -> Path:
    """A warm-started search stopped by Ctrl-C during measurement ``at``."""
    measurer = StandInMeasurer(samples=30, sigint_at=at)
    assert _warm_started(search, spec, warm, journal, measurer=measurer).interrupted
    return journal


def test_a_warm_start_cut_short_takes_its_share_once(
    search: Any, spec: KernelSpec, configurations: Any, tmp_path: Path
) -> None:
    whole = _warm_started(search, spec, configurations, tmp_path / "whole.jsonl")
    assert _warm(whole.journal) == BUDGET // 4
    journal = _stopped(search, spec, configurations, 5, tmp_path / "j.jsonl")  # 4 measured
    assert _warm(journal) == 4
    header = read_header(journal)["search"]["warm_start"]
    assert header["source"] == SOURCE and header["share"] == 0.25 and len(header["sha256"]) == 64
    backup = tmp_path / "copy.jsonl"
    shutil.copy(journal, backup)
    # without it, or with other configurations, the warm start cannot go on: refused
    with pytest.raises(UserError, match=r"cannot resume without --warm-start earlier\.json"):
        _run(search, spec, resume=backup)
    with pytest.raises(UserError, match=r"cannot resume with --warm-start earlier\.json"):
        _run(search, spec, resume=backup, warm_start=configurations[:10], warm_start_source=SOURCE)
    assert backup.read_bytes() == journal.read_bytes()  # nothing measured, nothing written
    resumed = _run(
        search, spec, resume=journal, warm_start=configurations, warm_start_source=SOURCE
    )
    assert _warm(resumed.journal) == BUDGET // 4  # 4 + 6, not 4 + 10
    assert _keys(resumed.journal) == _keys(whole.journal)


def test_a_finished_warm_start_is_not_measured_again(
    search: Any, spec: KernelSpec, configurations: Any, tmp_path: Path
) -> None:
    whole = _warm_started(search, spec, configurations, tmp_path / "whole.jsonl")
    journal = _stopped(search, spec, configurations, 15, tmp_path / "j.jsonl")
    assert _warm(journal) == BUDGET // 4  # the warm start finished: a generation after it
    backup = tmp_path / "copy.jsonl"
    shutil.copy(journal, backup)
    without = _run(search, spec, resume=journal)
    again = _run(search, spec, resume=backup, warm_start=configurations, warm_start_source=SOURCE)
    for resumed in (without, again):
        assert _warm(resumed.journal) == BUDGET // 4
        assert _keys(resumed.journal) == _keys(whole.journal)


def test_the_plan_records_the_warm_start_and_refuses_another(
    configurations: Any,
) -> None:
    given = SearchOptions(warm_start=configurations, warm_start_source=SOURCE)
    recorded = new_plan(given, 1).to_json()
    assert recorded["warm_start"]["source"] == SOURCE
    assert "warm_start" not in new_plan(SearchOptions(), 1).to_json()  # as it always was
    header = {"kind": "header", "search": recorded}
    path = Path("j.jsonl")
    moved = SearchOptions(warm_start=configurations, warm_start_source="elsewhere/same.json")
    assert resume_plan(moved, header, 1, path)[1] is None  # the same configurations
    share = SearchOptions(warm_start=configurations, warm_start_share=1.0)
    conflict = resume_plan(share, header, 1, path)[1]
    assert conflict is not None and "--warm-start-share 1: the journal's search ran" in conflict
    none = {"kind": "header", "search": new_plan(SearchOptions(), 1).to_json()}
    conflict = resume_plan(given, none, 1, path)[1]
    assert conflict is not None and "ran with no --warm-start" in conflict
