"""bench/search_quality.py runs end to end on its (clearly synthetic) ground truth."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType


def test_the_replay_benchmark_writes_its_fields(
    tmp_path: Path, bench_module: Callable[[str], ModuleType]
) -> None:
    search_quality = bench_module("search_quality")
    out = tmp_path / "q.json"
    kt = [] if importlib.util.find_spec("kernel_tuner") else ["--no-kernel-tuner"]
    argv = ["--synthetic", "--seeds", "2", "--strategies", "random", "--out", str(out), *kt]
    assert search_quality.main(argv) == 0
    report = json.loads(out.read_text())
    (truth,) = report["ground_truths"]
    assert truth["synthetic"] is True and truth["distinct_binaries"] < truth["candidates"]
    rows = truth["strategies"]
    assert {"default", "params-only", "random"} <= set(rows)
    for row in rows.values():
        assert row["budget_fraction"] == 0.1 and len(row["seeds"]) == 2
        assert 0.0 < row["median_of_optimum"] <= 1.0
    assert rows["default"]["joint_vs_params_only"]["seeds"] == 2
    # the smaller budgets: default and random (and Kernel Tuner's GA where installed) each
    curve = truth["budget_curve"]
    assert [p["budget_fraction"] for p in curve] == [0.02, 0.03, 0.05]
    assert [p["budget"] for p in curve] == sorted(p["budget"] for p in curve)
    for point in curve:
        assert {"default", "random"} <= set(point["median_of_optimum"])
        assert all(0.0 < m <= 1.0 for m in point["median_of_optimum"].values())
    assert isinstance(truth["meets_targets"]["beats_random_on_curve"], bool)
