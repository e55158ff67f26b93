"""bench/kernels_vs_vendor.py --from-result: a finished search's result file as a row (no GPU)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]
MAIN_JOB = ROOT / "bench" / "results" / "artifacts" / "main-job" / "gemm-sq4096.json"


def test_a_result_file_is_a_row_with_its_searchs_wall_time(
    bench_module: Callable[[str], ModuleType],
) -> None:
    kv = bench_module("kernels_vs_vendor")
    row = kv.result_row(MAIN_JOB)
    assert (row.kernel, row.problem) == ("gemm", "sq4096")
    assert row.search_wall_s == pytest.approx(250.1, abs=0.1)
    assert row.fillers == 378 and row.evaluations > 0
    assert row.tuned_p99_ms < row.default_p99_ms  # the pinned build and the default, confirmed


def test_from_result_needs_a_case_and_an_existing_file(
    bench_module: Callable[[str], ModuleType], tmp_path: Path
) -> None:
    kv = bench_module("kernels_vs_vendor")
    assert kv._given_result(f"gemm:sq4096={MAIN_JOB}") == (("kernels/gemm.cu", "sq4096"), MAIN_JOB)
    for bad in ("gemm:sq4096", f"gemm:sq4096={tmp_path / 'none.json'}", f"gemm={MAIN_JOB}"):
        with pytest.raises(SystemExit):
            kv._given_result(bad)
