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


def test_an_artifact_from_before_a_gene_is_remeasured_in_todays_space(
    bench_module: Callable[[str], ModuleType],
) -> None:
    """The registry's sq4096 artifact predates the GEMV genes: its default and pinned builds
    are re-measured with them at their defaults, not refused as outside the space."""
    from ctune.registry.store import read_result
    from ctune.spec import load_spec

    kv = bench_module("kernels_vs_vendor")
    spec = load_spec(ROOT / "kernels" / "gemm.yaml")
    artifact = read_result(ROOT / "registry" / "gemm" / "sq4096" / "sm90-nvidia-h200.json")
    assert "GEMV" not in dict(artifact.baseline.candidate.genes)
    members = dict(kv.remeasured_members(spec, artifact))
    assert set(members) == {"default", "tuned"}
    for candidate in members.values():
        genes = candidate.as_dict()
        assert set(genes) == set(spec.space.names) and genes["GEMV"] == 0
    assert members["tuned"].as_dict()["SWIZZLE"] == 8
