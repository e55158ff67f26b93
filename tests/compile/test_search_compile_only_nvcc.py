"""A compile-only search (`--objective regs`) with the real nvcc: its report says what
happened, and nothing that did not (no GPU time, gain, comparison or pruning)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctune.testing.cli_app import ctune_main

pytestmark = pytest.mark.nvcc

DATA = Path(__file__).parents[2] / "tests" / "data" / "kernels"
SEARCH = ["search", "saxpy.cu", "--objective", "regs", "--budget", "8", "--jobs", "2"]


@pytest.fixture
def saxpy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    for name in ("CTUNE_CACHE_DIR", "CTUNE_REGISTRY", "CTUNE_JOBS", "CTUNE_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _search(columns: int, *extra: str) -> str:
    result = CliRunner().invoke(ctune_main, [*SEARCH, *extra], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_report_of_a_compile_only_search(saxpy: Path) -> None:
    data = json.loads(_search(200, "--json", "--journal", "first.jsonl"))
    assert data["device"].startswith("none") and data["timing"]["measure_s"] == 0
    (member,) = data["front"]  # one objective: one best build, however many tie with it
    assert member["key"] == data["pinned"]
    assert member["values"][0] <= data["baseline"]["values"][0]
    assert member["values"][0] == member["resources"]["regs"]
    base = data["baseline"]["key"]
    for columns in (200, 80):  # the table, then one block per member
        out = _search(columns, "--journal", f"at-{columns}.jsonl")  # builds from the cache
        assert "compile-only (nothing ran on a GPU): 1 on the front" in out
        assert out.count(base) == 1 + (out.count("* pinned: " + base))  # the baseline once
        assert member["key"] in out
        assert "distinct binaries (" in out and "compile wait" in out
        for measured in ("gain", "p50 vs base", "pruned", "GPU busy", "measure ", "confirm"):
            assert measured not in out, (columns, measured)
