"""bench/vendor_rounds.py: the vendor-over-ctune ratio's confidence interval decides."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


def test_the_interval_says_faster_slower_or_the_same(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("vendor_rounds")
    faster = bench.ratio_summary([1.05, 1.04, 1.06, 1.05])
    assert faster["low"] > 1 and faster["ctune"] == "faster"
    assert faster["geomean"] == pytest.approx(1.05, abs=0.002)
    slower = bench.ratio_summary([0.95, 0.94, 0.96, 0.95])
    assert slower["high"] < 1 and slower["ctune"] == "slower"
    noisy = bench.ratio_summary([0.97, 1.02, 0.99, 1.01, 0.98])
    assert noisy["low"] < 1 < noisy["high"] and noisy["ctune"] == "same (1.0 inside)"
    # a ratio and its inverse: the geometric mean is symmetric about 1
    assert bench.ratio_summary([2.0, 0.5])["geomean"] == pytest.approx(1.0)
    assert bench.ratio_summary([1.1])["low"] is None  # one round has no interval
    # a build that hung in every round has no ratio, and the report says so
    assert bench.ratio_summary([]) == {
        "geomean": None,
        "low": None,
        "high": None,
        "rounds": 0,
        "ctune": "no clean round",
    }


def test_each_timed_build_gets_its_own_ratio_over_its_clean_rounds(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("vendor_rounds")
    vendor = {"p50_ms": 1.0, "p99_ms": 2.0}
    rows = [
        {
            "vendor": vendor,
            "ctune": {"p50_ms": 0.5, "p99_ms": 1.0},
            "k1": {"p50_ms": 2.0, "p99_ms": 4.0},
        },
        {"vendor": vendor, "ctune": {"p50_ms": 0.5, "p99_ms": 1.0}, "k1": {"outcome": "wrong"}},
    ]
    assert bench._ratios(rows, "ctune")["vendor_over_ctune_p50"]["geomean"] == pytest.approx(2.0)
    faulted = bench._ratios(rows, "k1")["vendor_over_ctune_p99"]
    assert faulted["rounds"] == 1 and faulted["geomean"] == pytest.approx(0.5)  # the fault left out


def test_a_variant_is_compared_with_the_pinned_build_round_by_round(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("vendor_rounds")
    vendor = {"p50_ms": 1.0, "p99_ms": 1.0}
    rows = [  # the variant 10% faster than the pin in each round, whatever the round's level
        {
            "vendor": vendor,
            "ctune": {"p50_ms": 1.1, "p99_ms": 1.2},
            "k1": {"p50_ms": 1.0, "p99_ms": 1.2},
        },
        {
            "vendor": vendor,
            "ctune": {"p50_ms": 2.2, "p99_ms": 2.4},
            "k1": {"p50_ms": 2.0, "p99_ms": 2.4},
        },
        {
            "vendor": vendor,
            "ctune": {"p50_ms": 1.65, "p99_ms": 1.8},
            "k1": {"p50_ms": 1.5, "p99_ms": 1.8},
        },
        {
            "vendor": vendor,
            "ctune": {"outcome": "run_timeout"},
            "k1": {"p50_ms": 9.0, "p99_ms": 9.0},
        },
    ]
    versus = bench._pinned_over(rows, "k1")
    p50 = versus["pinned_over_variant_p50"]
    assert p50["rounds"] == 3  # the round the pin timed out in is left out
    assert p50["geomean"] == pytest.approx(1.1) and p50["variant"] == "faster"
    assert versus["pinned_over_variant_p99"]["geomean"] == pytest.approx(1.0)
    # against the vendor, with the rounds' levels this far apart, it is not told apart
    assert bench._ratios(rows, "k1")["vendor_over_ctune_p50"]["ctune"] == "same (1.0 inside)"


def test_each_case_takes_each_place_in_the_order_in_turn(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("vendor_rounds")
    orders = [bench._rotated(["a", "b", "c"], r) for r in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert {o.index("a") for o in orders} == {0, 1, 2}
    assert bench._rotated([], 5) == []


def test_a_changed_gene_is_read_as_its_type(bench_module: Callable[[str], ModuleType]) -> None:
    from ctune.spec import load_spec

    bench = bench_module("vendor_rounds")
    spec = load_spec(Path(__file__).parents[2] / "kernels" / "tiled_matmul.yaml")
    base, dims = spec.default_candidate(), spec.problem().dims
    (changed,) = bench.changed_candidates(spec, base, ["ftz=true", "ptxas_opt=2"], dims)
    assert changed.as_dict()["ftz"] is True and changed.as_dict()["ptxas_opt"] == 2
    assert bench.changed_candidates(spec, base, ["ftz=false"], dims)[0].key() == base.key()


def test_the_report_names_the_toolchain_the_builds_use(
    bench_module: Callable[[str], ModuleType],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """With a ptxas setting the builds come from the split toolchain: the fingerprint must
    probe that one, not the plain nvcc on the path (which would say ptxas 13.0)."""
    import json

    import ctune.compile.select_toolchain as select_toolchain
    import ctune.identity_probe as identity_probe

    bench = bench_module("vendor_rounds")
    probed: list[str] = []

    def fingerprint(*_args: object, nvcc: str = "nvcc", **_kw: object) -> dict[str, str]:
        probed.append(nvcc)
        return {"gpu_name": "NVIDIA H200", "sm": "sm_90", "ptxas_version": f"of {nvcc}"}

    monkeypatch.setattr(select_toolchain, "nvcc_for", lambda cfg: "/split/bin/nvcc")
    monkeypatch.setattr(identity_probe, "current_fingerprint", fingerprint)
    monkeypatch.setattr(bench, "run_cases", lambda *args, **kw: [])
    assert bench.main(["--case", "gemm:sq4096", "--rounds", "2", "--out", str(tmp_path)]) == 0
    assert probed == ["/split/bin/nvcc"]
    (report,) = tmp_path.glob("vendor_rounds-*.json")
    assert json.loads(report.read_text())["fingerprint"]["ptxas_version"] == "of /split/bin/nvcc"


def test_a_case_takes_its_own_pool_or_the_shared_one(
    bench_module: Callable[[str], ModuleType],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``--case K:P=POOL`` times that pool beside that row alone; the other rows take
    ``--pool``; a pool file that is not there stops the run before any GPU work."""
    import ctune.compile.select_toolchain as select_toolchain
    import ctune.identity_probe as identity_probe

    bench = bench_module("vendor_rounds")
    shared, own = tmp_path / "shared.t4.json", tmp_path / "own.t4.json"
    shared.write_text("{}")
    own.write_text("{}")
    seen: dict[str, object] = {}

    def run_cases(names: list[str], rounds: int, pools: dict, *_a: object) -> list:
        seen.update(names=names, pools=pools)
        return []

    monkeypatch.setattr(select_toolchain, "nvcc_for", lambda cfg: "nvcc")
    monkeypatch.setattr(identity_probe, "current_fingerprint", lambda *a, **kw: {"sm": "sm_90"})
    monkeypatch.setattr(bench, "run_cases", run_cases)
    argv = ["--case", "gemm:sq4096", "--case", f"gemm:llm8b-qkv-t16={own}", "--rounds", "2"]
    assert bench.main([*argv, "--pool", str(shared), "--out", str(tmp_path)]) == 0
    assert seen["names"] == ["gemm:sq4096", "gemm:llm8b-qkv-t16"]
    assert seen["pools"] == {"gemm:sq4096": shared, "gemm:llm8b-qkv-t16": own}
    with pytest.raises(SystemExit, match="no pool file"):
        bench.main(["--case", f"gemm:sq4096={tmp_path / 'absent.json'}", "--rounds", "2"])
