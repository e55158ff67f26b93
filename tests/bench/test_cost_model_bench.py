"""bench/cost_model.py runs end to end on a tiny (clearly synthetic) replay."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from ctune.model import unavailable

needs_model = pytest.mark.skipif(
    unavailable() is not None, reason="needs the model extra (ctune[model])"
)


@needs_model
def test_the_cost_model_benchmark_writes_its_fields(
    tmp_path: Path, bench_module: Callable[[str], ModuleType]
) -> None:
    bench = bench_module("cost_model")
    out = tmp_path / "c.json"
    assert bench.main(["--synthetic", "--seeds", "1", "--fraction", "0.06", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == "cost_model" and report["seeds"] == 1
    assert report["fingerprint"]["gpu"].startswith("none")
    assert "CUTLASS" in report["cutlass_problem_set"]
    (truth,) = report["ground_truths"]
    assert truth["synthetic"] is True and truth["budget"] == 62
    arms = ("off", "on", "on_warm", "on_slots", "on_warm_slots")
    for arm in (*arms, "off_at_on_builds", "off_at_warm_builds"):
        (run,) = truth[arm]["runs"]
        assert 0.0 < run["of_optimum"] <= 1.0 and run["builds"] >= 1
    assert truth["slots"] == 16
    assert "compile_wall_s@16" in truth["off"]["runs"][0]  # off is walled at both counts
    assert "compile_wall_s@16" in truth["on_slots"]["runs"][0]
    assert set(truth["wall_to_0.99_saved"]) == {"on@1", "on_warm@1", "on@16", "on_warm@16"}
    (off,) = truth["off"]["runs"]
    (warm,) = truth["on_warm"]["runs"]
    assert off["skipped"] == 0 and warm["skipped"] > 0  # the earlier journal lets it skip
    assert warm["builds"] < off["builds"]
    assert truth["builds_saved_warm"] == pytest.approx(1 - warm["builds"] / off["builds"])
    assert isinstance(truth["meets_target"], bool)


def test_a_generation_s_compile_wall_is_its_builds_on_the_first_free_slot(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("cost_model")
    generations = {1: [3.0, 1.0, 2.0, 2.0], 2: [4.0]}
    assert bench.compile_walls(generations, 1) == {1: 8.0, 2: 4.0}  # one after another
    # 3 | 1, then 2 on the slot free at 1, then 2 on the one free at 3: ends at 5
    assert bench.compile_walls(generations, 2) == {1: 5.0, 2: 4.0}
    assert bench.compile_walls(generations, 16) == {1: 3.0, 2: 4.0}  # the slowest build


@needs_model
def test_a_search_of_another_shape_warm_starts_the_problem_set_arms(
    tmp_path: Path, bench_module: Callable[[str], ModuleType]
) -> None:
    """--other-shape: the same (synthetic) subspace on sq2048 searched first, without the
    model; the search of sq1024 then learns from its journal, as a problem set's later
    shapes do, and skips from its first generations."""
    bench = bench_module("cost_model")
    from ctune.testing.binary_truth import synthetic_binary_truth

    _, spec = bench.synthetic()
    other = synthetic_binary_truth(
        spec, spec.problem("sq2048"), bench.SYNTHETIC_SUBSPACE, seed=5
    ).save(tmp_path / "other.json")
    out = tmp_path / "c.json"
    argv = ["--synthetic", "--seeds", "1", "--fraction", "0.06", "--out", str(out)]
    assert bench.main([*argv, "--other-shape", str(other)]) == 0
    (truth,) = json.loads(out.read_text())["ground_truths"]
    assert truth["problem"] == "sq1024" and truth["other_shapes"] == ["sq2048"]
    (cold,) = truth["on"]["runs"]
    for arm in ("on_shape", "on_shape_slots"):
        (run,) = truth[arm]["runs"]
        assert run["skipped"] > cold["skipped"]  # the other shape's trials taught it
    assert truth["builds_saved_shape"] == pytest.approx(
        1 - truth["on_shape"]["median_builds"] / truth["off"]["median_builds"]
    )
    with pytest.raises(SystemExit, match="not tiled_matmul on another problem than sq1024"):
        same = bench.synthetic()[0].save(tmp_path / "same.json")
        bench.main([*argv, "--other-shape", str(same)])


@needs_model
def test_a_search_on_another_gpu_warm_starts_the_new_gpu_arms(
    tmp_path: Path, bench_module: Callable[[str], ModuleType]
) -> None:
    """--other-gpu: the same (synthetic) kernel, problem and subspace "recorded" on another
    GPU with the same landscape is searched first, without the model; the search on this
    one learns from its journal, as a first search on a new GPU does, and skips more."""
    bench = bench_module("cost_model")
    other = bench.synthetic()[0]
    other.fingerprint = {**other.fingerprint, "gpu_name": "synthetic GPU B (no GPU)"}
    out = tmp_path / "c.json"
    argv = ["--synthetic", "--seeds", "1", "--fraction", "0.06", "--out", str(out)]
    assert bench.main([*argv, "--other-gpu", str(other.save(tmp_path / "b.json"))]) == 0
    (truth,) = json.loads(out.read_text())["ground_truths"]
    assert truth["gpu"] == "synthetic (no GPU)"
    assert truth["other_gpus"] == ["synthetic GPU B (no GPU)"] and "on_shape" not in truth
    (cold,) = truth["on"]["runs"]
    for arm in ("on_gpu", "on_gpu_slots"):
        (run,) = truth[arm]["runs"]
        assert run["skipped"] > cold["skipped"]  # the other GPU's trials taught it
        assert run["builds"] < truth["off"]["runs"][0]["builds"]
    assert truth["builds_saved_gpu"] == pytest.approx(
        1 - truth["on_gpu"]["median_builds"] / truth["off"]["median_builds"]
    )
    (short,) = truth["off_at_gpu_builds"]["runs"]
    assert truth["off_at_gpu_builds"]["budget"] == truth["on_gpu"]["runs"][0]["builds"]
    assert short["skipped"] == 0
    with pytest.raises(SystemExit, match="on another GPU than synthetic"):
        same = bench.synthetic()[0].save(tmp_path / "same.json")
        bench.main([*argv, "--other-gpu", str(same)])


@needs_model
def test_a_problem_set_replays_each_shape_warm_from_the_others(
    tmp_path: Path, bench_module: Callable[[str], ModuleType]
) -> None:
    """--problem-set: each recorded CUTLASS shape in turn, after searches of the others."""
    bench = bench_module("cost_model")
    out = tmp_path / "set.json"
    presets = ["cutlass_gemm", "cutlass_gemm_up", "cutlass_gemm_qkv"]
    argv = ["--problem-set", *presets, "--seeds", "1", "--fraction", "0.05", "--out", str(out)]
    assert bench.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["problem_set"] == presets and "cutlass_problem_set" not in report
    problems = [t["problem"] for t in report["ground_truths"]]
    assert problems == ["sq4096", "llm8b-up-t2048", "llm8b-qkv-t2048"]
    for truth in report["ground_truths"]:
        assert sorted(truth["other_shapes"]) == sorted(p for p in problems if p != truth["problem"])
        assert set(truth["compile_wall_saved_shape"]) == {"@1", "@16"}
        (run,) = truth["on_shape"]["runs"]
        assert 0.0 < run["of_optimum"] <= 1.0
    with pytest.raises(SystemExit, match="2 or more recorded presets"):
        bench.main(["--problem-set", "cutlass_gemm", "--out", str(out)])
