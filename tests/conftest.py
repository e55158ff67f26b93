"""Markers that need hardware skip with a reason, or fail under --require.

`--require nvcc,gpu,nvml` (or CTUNE_REQUIRE=...) turns those skips into
failures, so CI cannot pass by silently skipping the tier it exists to run
(Kernel Tuner's silent skips are the failure mode this avoids).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import signal
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

pytest.register_assert_rewrite("ctune.testing")

HARDWARE_MARKERS = ("nvcc", "gpu", "nvml")
DEFAULT_TIMEOUT_S = {"nvcc": 300, "gpu": 600, "nvml": 600}


def pytest_configure(config: pytest.Config) -> None:
    """Give Ctrl-C back its default handler where the suite was started with SIGINT ignored
    (``nohup`` or ``cmd &`` in a shell without job control): the interrupt tests send real
    SIGINTs to this process and to ctune processes it starts, which inherit the disposition.
    A Python handler is reset to the default on exec, so those children get Python's own."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require",
        default=os.environ.get("CTUNE_REQUIRE", ""),
        help="comma-separated markers (nvcc,gpu,nvml) whose absence is a failure, not a skip",
    )


@cache
def _have_nvcc() -> str | None:
    return None if shutil.which("nvcc") else "nvcc is not on PATH"


@cache
def _have_gpu() -> str | None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as exc:  # ImportError, CUDARuntimeError, missing driver
        return f"no usable GPU through CuPy ({type(exc).__name__})"
    return None


@cache
def _have_nvml() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlDeviceGetTotalEnergyConsumption(pynvml.nvmlDeviceGetHandleByIndex(0))
    except Exception as exc:
        return f"no NVML energy counter ({type(exc).__name__})"
    return None


_PROBES = {"nvcc": _have_nvcc, "gpu": _have_gpu, "nvml": _have_nvml}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    required = {m.strip() for m in config.getoption("--require").split(",") if m.strip()}
    unknown = required - set(HARDWARE_MARKERS)
    if unknown:
        raise pytest.UsageError(f"--require: unknown {sorted(unknown)} (allowed: nvcc, gpu, nvml)")
    for item in items:
        needed = [m for m in HARDWARE_MARKERS if item.get_closest_marker(m)]
        if item.get_closest_marker("gpu") and "nvcc" not in needed:
            needed.insert(0, "nvcc")  # every GPU test compiles its kernel
        timeout = max((DEFAULT_TIMEOUT_S[m] for m in needed), default=60)
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(timeout))
        for marker in needed:
            reason = _PROBES[marker]()
            if reason is None:
                continue
            if marker in required:
                item.user_properties.append(("ctune_required_missing", f"{marker}: {reason}"))
            else:
                item.add_marker(pytest.mark.skip(reason=f"needs {marker}: {reason}"))
            break


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name, reason in item.user_properties:
        if name == "ctune_required_missing":
            pytest.fail(f"required hardware missing: {reason}", pytrace=False)


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import matplotlib`` fails, as on a machine without the ``plot`` extra."""
    import builtins
    from typing import Any

    real_import = builtins.__import__

    def blocked(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", blocked)


BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def bench_module() -> Callable[[str], ModuleType]:
    """Import a benchmark script, ``bench/NAME.py``, as a module (bench/ is on the path
    while it imports: the scripts import one another)."""

    def load(name: str) -> ModuleType:
        sys.path.insert(0, str(BENCH))
        try:
            return importlib.import_module(name)
        finally:
            sys.path.remove(str(BENCH))

    return load


@pytest.fixture
def gpu_test_module() -> Callable[[str], ModuleType]:
    """Import a GPU-tier test file, ``tests/gpu/NAME.py``, as a module: the CPU tier checks
    its cases against the specs (a GPU test only runs, and fails, on a GPU machine)."""

    def load(name: str) -> ModuleType:
        path = Path(__file__).parent / "gpu" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"gpu_cases_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
