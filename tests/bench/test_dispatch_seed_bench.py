"""bench/dispatch_seed.py: a set's folder started from the committed registry's pins."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from ctune.registry.store import read_artifact_file
from ctune.sets.problem_set import read_winners
from ctune.sets.set_layout import SetOptions
from ctune.spec import load_spec

ROOT = Path(__file__).parents[2]


def test_the_winners_are_the_registry_s_pins_and_the_set_reads_them(
    bench_module: Callable[[str], ModuleType], tmp_path: Path
) -> None:
    bench = bench_module("dispatch_seed")
    args = ["--kernel", str(ROOT / "kernels" / "gemm.cu"), "--set", "t128-fp16"]
    args += ["--set-dir", str(tmp_path / "set"), "--pools", str(tmp_path / "pools")]
    assert bench.main(args) == 0
    spec = load_spec(ROOT / "kernels" / "gemm.yaml")
    winners = read_winners(SetOptions("t128-fp16", tmp_path / "set"), spec)
    assert set(winners) == set(spec.problem_sets["t128-fp16"])
    pinned = read_artifact_file(ROOT / "registry/gemm/llm70b-qkv-t128/sm90-nvidia-h200.json")
    genes = pinned.pinned_member().candidate.as_dict()
    assert genes.items() <= winners["llm70b-qkv-t128"].as_dict().items()
    (pool,) = (tmp_path / "pools").iterdir()  # one compile group: fp16
    assert len(json.loads(pool.read_text())["results"]) == len(winners)


def test_a_shape_without_an_artifact_is_one_line(
    bench_module: Callable[[str], ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = bench_module("dispatch_seed")
    args = ["--kernel", str(ROOT / "kernels" / "gemm.cu"), "--set", "square"]
    args += ["--set-dir", str(tmp_path / "set"), "--pools", str(tmp_path / "pools")]
    assert bench.main(args) == 2
    assert (
        "sq8192/sm90-nvidia-h200.json: no such file: tune sq8192 first" in capsys.readouterr().out
    )
    assert not (tmp_path / "set").exists()
