"""A search within the device's limits: never proposed, or INVALID after compile; infeasible."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.config import Settings
from ctune.errors import UserError
from ctune.objective import parse_objective_spec
from ctune.records import Outcome
from ctune.search import events as ev
from ctune.search.driver import SearchOptions, run_search
from ctune.search.journal import read
from ctune.spec import load_spec
from ctune.spec.space.limits import table_limits
from ctune.testing.standins import (
    STANDIN_YAML,
    StandInCompiler,
    StandInMeasurer,
    write_standin_kernel,
)

# the stand-in kernel with its block size as a gene: 2048 threads never launch; 1024
# threads launch only with at most 64 registers per thread
THREADS_YAML = STANDIN_YAML.replace(
    "  SPLIT_K:",
    "  THREADS: {{values: [128, 1024, 2048], default: 128, family: launch}}\n  SPLIT_K:",
).replace("block: [128]", "block: [THREADS]")


def _search(tmp_path: Path, default_threads: int = 128, **options):
    yaml = THREADS_YAML.replace(
        "default: 128, family: launch", f"default: {default_threads}, family: launch"
    )
    spec = load_spec(write_standin_kernel(tmp_path / "k", yaml=yaml))
    events: list[ev.SearchEvent] = []
    result = run_search(
        Settings(cache_dir=tmp_path / "cache"),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(confirm_processes=0, journal_fsync=False, **options),
        compiler=StandInCompiler(spec, fail_every=None),
        measurer=StandInMeasurer(samples=30),
        limits=table_limits("sm_90"),
        on_event=events.append,
    )
    return result, events


def test_what_the_device_cannot_launch_is_infeasible_not_failed(tmp_path: Path) -> None:
    result, events = _search(tmp_path, budget=60, seed=4, strategy="random")
    replay, _ = read(result.journal)
    threads = [t.candidate.as_dict()["THREADS"] for t in replay.trials]
    assert 2048 not in threads  # ruled out before compiling: never proposed
    invalid = [t for t in replay.trials if t.outcome is Outcome.INVALID]
    assert invalid, "some 1024-thread candidates need more than 64 registers"
    for trial in invalid:
        assert trial.candidate.as_dict()["THREADS"] == 1024 and trial.measurement is None
        assert trial.build is not None and (trial.build.resources.regs or 0) > 64
        assert trial.build.log_tail.startswith("device limit: ")
        assert "threads need" in trial.build.log_tail
    assert "invalid" not in result.failures
    assert result.infeasible == len(invalid)
    notes = [e.message for e in events if isinstance(e, ev.Note)]
    assert any("device limits (sm_90 table) rule out" in n for n in notes)


def test_a_default_beyond_the_device_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        _search(tmp_path, default_threads=2048, budget=5)
    text = str(err.value)
    assert "the default build breaks a device limit (sm_90 table)" in text
    assert "'THREADS <= 1024'" in text and "\n" not in text


def test_a_default_beyond_the_table_is_refused_before_the_gpu_check(tmp_path: Path) -> None:
    """On a machine without a GPU, the default build's 2048 threads are what is wrong (the
    target's table says so without a GPU), not the missing GPU (exit 3): checked before."""
    yaml = THREADS_YAML.replace("default: 128, family: launch", "default: 2048, family: launch")
    spec = load_spec(write_standin_kernel(tmp_path / "k", yaml=yaml))
    compiler = StandInCompiler(spec, fail_every=None)
    with pytest.raises(UserError, match=r"default build breaks a device limit \(sm_90 table\)"):
        run_search(
            Settings(cache_dir=tmp_path / "cache", arch="sm_90"),
            spec,
            parse_objective_spec(["p99"], [], spec.metrics),
            SearchOptions(confirm_processes=0, journal_fsync=False, budget=5),
            compiler=compiler,
            capabilities=frozenset(),  # no GPU
        )
    assert compiler.calls == 0
