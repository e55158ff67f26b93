"""bench/vendor_kernels.py: each row's vendor call once inside an NVTX range of its name,
after one warm-up call outside it (a stand-in timer and torch: the ranges' logic only)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest


class StandInTorch:
    """Records what the script does with torch's CUDA calls, in order."""

    def __init__(self, events: list[str]) -> None:
        nvtx = SimpleNamespace(
            range_push=lambda name: events.append(f"push {name}"),
            range_pop=lambda: events.append("pop"),
        )
        self.cuda = SimpleNamespace(synchronize=lambda: None, nvtx=nvtx)


def test_each_case_is_called_once_inside_its_range(
    bench_module: Callable[[str], ModuleType],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = bench_module("vendor_kernels")
    events: list[str] = []

    class StandInVendorTimer:
        torch = StandInTorch(events)

        def launch(self, kernel: str, problem: str) -> tuple[str, Callable[[], Any]]:
            return f"vendor of {kernel}", lambda: events.append(f"call {problem}")

    monkeypatch.setitem(
        sys.modules, "kernels_vs_vendor", SimpleNamespace(VendorTimer=StandInVendorTimer)
    )
    assert bench.main(["--case", "gemm:sq4096", "--case", "attention:prefill-s1024-d64"]) == 0
    assert events == [
        "call sq4096", "push gemm:sq4096", "call sq4096", "pop",
        "call prefill-s1024-d64", "push attention:prefill-s1024-d64",
        "call prefill-s1024-d64", "pop",
    ]  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "gemm:sq4096: vendor of gemm",
        "attention:prefill-s1024-d64: vendor of attention",
    ]


def test_a_case_is_required(bench_module: Callable[[str], ModuleType]) -> None:
    with pytest.raises(SystemExit) as stop:
        bench_module("vendor_kernels").main([])
    assert stop.value.code == 2
