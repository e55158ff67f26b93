"""Ground-truth files and the replay stand-ins: round trip and a replayed search."""

from __future__ import annotations

from pathlib import Path

from ctune.config import Settings
from ctune.objective import parse_objective_spec
from ctune.search.driver import SearchOptions, run_search
from ctune.search.journal import read
from ctune.spec import KernelSpec
from ctune.testing.standins import (
    GroundTruth,
    ReplayCompiler,
    ReplayMeasurer,
    synthetic_ground_truth,
)


def test_ground_truth_round_trip(spec: KernelSpec, tmp_path: Path) -> None:
    truth = synthetic_ground_truth(spec, spec.problem(), fixed={"SCHEDULE": "row"})
    count, _ = spec.space.count_valid(spec.problem().dims)
    assert truth.synthetic and len(truth.entries) == count // 3  # one of three schedules
    path = truth.save(tmp_path / "standin-small.json.gz")
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    again = GroundTruth.load(path)
    assert again.entries == truth.entries and again.meta["fixed"] == {"SCHEDULE": "row"}
    assert truth.save(tmp_path / "again.json.gz").read_bytes() == path.read_bytes()


def test_a_replayed_search_measures_recorded_values(spec: KernelSpec, tmp_path: Path) -> None:
    truth = synthetic_ground_truth(spec, spec.problem())
    measurer, compiler = ReplayMeasurer(truth), ReplayCompiler(truth)
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    result = run_search(
        Settings(cache_dir=tmp_path),
        spec,
        objective,
        SearchOptions(budget=40, seed=3, journal_fsync=False),
        compiler=compiler,
        measurer=measurer,
        fingerprint=truth.fingerprint,
    )
    assert result.evaluations == 40 and measurer.device_name.startswith("replay of")
    replay, _ = read(result.journal)
    recorded = truth.values("p50_ms")
    for trial in replay.trials:
        if trial.feasible:
            assert trial.values == (recorded[trial.candidate.key()],)
    assert "compile_error" in result.failures  # the recorded failures replay as failures
    assert result.pinned is not None and result.front[0].confirmed
