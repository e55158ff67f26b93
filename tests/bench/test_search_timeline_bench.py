"""bench/search_timeline.py's summary over runs (the runs themselves need the GPU)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType


def _run(worker_ready: float, walls: list[tuple[float, bool]], rounds: list[float]) -> dict:
    return {
        "steps": {"prestart": (0.05, 0.06), "worker ready": (0.06, worker_ready)},
        "trials": [{"at_s": 1.0, "wall_s": w, "pruned": p} for w, p in walls],
        "confirmation": {"round_seconds": rounds},
        "rounds": [("fresh worker takes over", 5.0, 5.0 + r / 4) for r in rounds],
    }


def test_the_summary_takes_medians_over_runs_and_splits_pruned_candidates(
    bench_module: Callable[[str], ModuleType],
) -> None:
    search_timeline = bench_module("search_timeline")
    runs = [
        _run(2.0, [(0.020, True), (0.080, False)], [0.6, 0.7]),
        _run(3.0, [(0.022, True), (0.090, False), (0.100, False)], [0.8]),
        _run(2.5, [(0.024, True)], [0.65]),
    ]
    got = search_timeline.summary(runs)
    assert got["step_end_s_median"] == {"prestart": 0.06, "worker ready": 2.5}
    assert got["measurement"]["pruned"] == {"candidates_per_run": 1.0, "median_ms": 22.0}
    assert got["measurement"]["not pruned"] == {"candidates_per_run": 1.0, "median_ms": 90.0}
    assert got["confirmation_round_s_median"] == 0.675
    # the take-overs last a quarter of each round here: 150, 175, 200 and 162.5 ms
    (took,) = got["confirmation_steps_ms_median"].values()
    assert abs(took - 168.75) < 0.1
    # a step missing from one run has no median
    del runs[1]["steps"]["worker ready"]
    assert "worker ready" not in search_timeline.summary(runs)["step_end_s_median"]


def test_a_result_is_named_by_benchmark_and_gpu_and_stamped(
    tmp_path: Path, bench_module: Callable[[str], ModuleType]
) -> None:
    search_overhead = bench_module("search_overhead")
    device = {"sm": "sm_90", "gpu_name": "NVIDIA H200"}  # fingerprint fields, not a GPU
    path = search_overhead.write_result({"benchmark": "search_timeline", "x": 1}, tmp_path, device)
    assert path == tmp_path / "search_timeline-sm90-nvidia-h200.json"
    got = json.loads(path.read_text())
    assert got["x"] == 1 and got["ctune_version"] and got["created_utc"].startswith("20")
