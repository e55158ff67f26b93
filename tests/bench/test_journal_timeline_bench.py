"""bench/journal_timeline.py: a finished search's timeline from its journal (no GPU)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType


def _trial(number: int, at: float, hit: bool, compile_s: float, value: float | None) -> dict:
    return {
        "kind": "trial",
        "elapsed_s": at,
        "trial": {
            "number": number,
            "generation": 0 if number == 0 else 1,
            "outcome": "ok" if value is not None else "compile_error",
            "values": [] if value is None else [value],
            "build": {"cache_hit": hit, "compile_s": compile_s},
        },
    }


def test_builds_fillers_and_the_best_are_read_from_the_journal(
    bench_module: Callable[[str], ModuleType], tmp_path: Path
) -> None:
    journal_timeline = bench_module("journal_timeline")
    records = [
        {"kind": "header", "device": "NVIDIA H200 (sm_90)"},
        _trial(0, 50.0, False, 48.0, 0.20),  # the default build
        _trial(1, 52.0, True, 48.0, 0.19),  # a runtime variant of it: a filler
        _trial(2, 53.0, True, 48.0, 0.21),
        _trial(3, 110.0, False, 55.0, 0.18),
        _trial(4, 111.0, False, 20.0, None),  # failed to build
        {"kind": "generation", "generation": 1},
    ]
    path = tmp_path / "j.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("\n".join(json.dumps(r) for r in records) + "\n")
    got = journal_timeline.timeline(journal_timeline.read_journal(path))
    assert [b["trial"] for b in got["builds"]] == [0, 3, 4]
    assert [b["fillers_before"] for b in got["builds"]] == [0, 2, 0]
    assert got["builds"][2]["value"] is None
    summary = got["summary"]
    assert (summary["builds"], summary["fillers"]) == (3, 2)
    assert (summary["compile_s_median"], summary["compile_s_max"]) == (48.0, 55.0)
    assert summary["first_measurement_at_s"] == 50.0 and summary["last_trial_at_s"] == 111.0
    assert summary["best_in_search"] == {"value": 0.18, "at_s": 110.0, "trial": 3}
    no_compile_time = {**got["builds"][2], "compile_s": None}
    assert "| 4 | 1 | 111 | - | - | 0 |" in journal_timeline.table({"builds": [no_compile_time]})
    assert journal_timeline.device(records) == {"gpu": "NVIDIA H200", "sm": "sm_90"}
    assert journal_timeline.device([{"kind": "header"}]) == {}
    assert journal_timeline.main([str(tmp_path / "missing.jsonl")]) == 2
