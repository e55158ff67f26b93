"""bench/staleness.py: its cases cover what they claim, each edit still applies to this
checkout, its reports are read per artifact, and the committed result is of these cases."""

from __future__ import annotations

import ast
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    """bench/staleness.py as a module, at collection: its cases parametrize a test."""
    spec = importlib.util.spec_from_file_location(
        "bench_staleness", ROOT / "bench" / "staleness.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


BENCH = _load()


@pytest.fixture
def bench() -> ModuleType:
    return BENCH


def test_at_least_thirty_of_each_kind_with_the_required_edits(bench: ModuleType) -> None:
    names = [c.name for c in bench.CASES]
    assert len(set(names)) == len(names)
    assert sum(not c.real for c in bench.CASES) >= 30
    assert sum(c.real for c in bench.CASES) >= 30
    required = {
        "gene default in the spec": True,
        "flag catalogue default": True,
        "render rule of a flag": True,
        "docstring edit in the reference": False,
    }
    for text, real in required.items():
        assert any(text in c.name and c.real is real for c in bench.CASES), text
    # a real edit names what its reports must show
    assert all(c.reasons != ("",) for c in bench.CASES if c.real)


def _checkout_copy(folder: Path) -> Path:
    clone = folder / "clone"
    ignore = shutil.ignore_patterns("__pycache__")
    for part in ("kernels", "ctune"):
        shutil.copytree(ROOT / part, clone / part, ignore=ignore)
    shutil.copy(ROOT / "README.md", clone / "README.md")
    return clone


def _snapshot(clone: Path) -> dict[str, bytes]:
    return {
        p.relative_to(clone).as_posix(): p.read_bytes() for p in clone.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize("case", BENCH.CASES, ids=[c.name for c in BENCH.CASES])
def test_each_edit_still_applies_and_changes_something(case: Any, tmp_path: Path) -> None:
    clone = _checkout_copy(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = _snapshot(clone)
    env = case.edit(clone, scratch)  # a text the checkout no longer has: SystemExit
    after = _snapshot(clone)
    assert env or after != before, case.name
    # an edit tests what it claims, not a file that no longer loads
    for name, data in after.items():
        if data != before.get(name) and name.endswith(".py"):
            ast.parse(data, name)
        elif data != before.get(name) and name.endswith(".yaml"):
            assert isinstance(yaml.safe_load(data), dict), name


def test_reports_are_read_per_artifact(bench: ModuleType) -> None:
    output = "\n".join(
        [
            "fresh hand_gemm/sq4096/sm90-nvidia-h200",
            "STALE hand_gemm/llm8b-down-t128/sm90-nvidia-h200",
            "  default[GROUP_M]: 8 -> 1 (hard)",
            "WARN hand_attention/prefill-s2048-d128/sm90-nvidia-h200",
            "  nvcc_flags[172b5a8311a2]: (none) -> -Xptxas -O3 (build)",
            "STALE gemm/sq4096/sm90-nvidia-h200: kernel spec kernels/x.yaml not found",
            "not checked: no GPU (driver)",
            "  an indented line after the summary belongs to no artifact",
        ]
    )
    reports = bench._reports(output)
    assert {k: v for k, (v, _) in reports.items()} == {
        "hand_gemm/sq4096/sm90-nvidia-h200": "fresh",
        "hand_gemm/llm8b-down-t128/sm90-nvidia-h200": "STALE",
        "hand_attention/prefill-s2048-d128/sm90-nvidia-h200": "WARN",
        "gemm/sq4096/sm90-nvidia-h200": "STALE",
    }
    assert "default[GROUP_M]" in reports["hand_gemm/llm8b-down-t128/sm90-nvidia-h200"][1]
    assert (
        "default[GROUP_M]" not in reports["hand_attention/prefill-s2048-d128/sm90-nvidia-h200"][1]
    )
    assert "not found" in reports["gemm/sq4096/sm90-nvidia-h200"][1]
    assert "belongs to no" not in "".join(text for _, text in reports.values())


def test_the_committed_result_is_of_these_cases_and_clean(bench: ModuleType) -> None:
    result = json.loads((ROOT / "bench" / "results" / "staleness.json").read_text())
    assert [c["name"] for c in result["cases"]] == [c.name for c in bench.CASES]
    assert result["false_stale"] == 0 and result["missed_stale"] == 0
    assert all(c["ok"] for c in result["cases"])
    for case in result["cases"]:
        if case["kind"] == "real":
            assert case["expected_stale"] and set(case["expected_stale"]) <= set(case["stale"])
        else:
            assert case["stale"] == []
