"""`ctune doctor` names what is missing: CuPy not installed, CuPy installed with no driver,
a driver that sees no GPU, or CuPy unable to use the driver there; a driver / GPU row
always. The driver is read through libcuda itself (here a stand-in for the cases this
machine is not), CuPy through its import (a stand-in module)."""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import sys
import types
from typing import Any

import pytest

import ctune.doctor as doctor_module
from ctune.doctor import probe_driver


class StandInLibcuda:
    """The five driver calls the probe makes, answering as a driver with ``gpus`` would;
    ``init`` is what cuInit returns (100: no device)."""

    def __init__(self, gpus: tuple[str, ...] = (), init: int = 0) -> None:
        self.gpus, self.init = gpus, init

    @staticmethod
    def _set(ref: Any, value: Any) -> int:
        ref._obj.value = value
        return 0

    def cuDriverGetVersion(self, ref: Any) -> int:
        return self._set(ref, 13000)

    def cuInit(self, flags: int) -> int:
        return self.init

    def cuGetErrorName(self, status: int, ref: Any) -> int:
        return self._set(ref, b"CUDA_ERROR_OPERATING_SYSTEM")

    def cuDeviceGetCount(self, ref: Any) -> int:
        return self._set(ref, len(self.gpus))

    def cuDeviceGet(self, ref: Any, index: int) -> int:
        return self._set(ref, index)

    def cuDeviceGetName(self, buffer: Any, size: int, device: ctypes.c_int) -> int:
        buffer.value = self.gpus[device.value].encode()
        return 0


def _no_libcuda(name: str) -> Any:
    raise OSError(f"{name}: cannot open shared object file")


def test_the_driver_probe_tells_no_driver_from_no_gpu() -> None:
    none = probe_driver(_no_libcuda)
    assert not none.loaded and none.problem.startswith("no NVIDIA driver (libcuda.so.1 not found)")
    hidden = probe_driver(lambda _: StandInLibcuda(init=100), {"CUDA_VISIBLE_DEVICES": ""})
    assert (
        hidden.loaded
        and hidden.problem == "driver for CUDA 13.0, but no GPU (CUDA_VISIBLE_DEVICES='')"
    )
    broken = probe_driver(lambda _: StandInLibcuda(init=304), {})
    assert broken.problem == "driver for CUDA 13.0: cuInit failed: CUDA_ERROR_OPERATING_SYSTEM"
    two = probe_driver(lambda _: StandInLibcuda(("NVIDIA H200", "NVIDIA H200")), {})
    assert two.problem == "" and two.gpus == ("NVIDIA H200", "NVIDIA H200")


def _cupy(runtime_error: str | None) -> types.ModuleType:
    """A CuPy whose runtime answers (one device) or raises ``runtime_error``."""

    def answer(value: int) -> Any:
        def call() -> int:
            if runtime_error is not None:
                raise RuntimeError(runtime_error)
            return value

        return call

    module = types.ModuleType("cupy")
    module.__version__ = "14.2.0"  # type: ignore[attr-defined]
    runtime = types.SimpleNamespace(getDeviceCount=answer(1), runtimeGetVersion=answer(13020))
    module.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    return module


INSUFFICIENT = "cudaErrorInsufficientDriver: CUDA driver version is insufficient"


@pytest.mark.parametrize(
    ("cupy", "libcuda", "driver_row", "cupy_row"),
    [
        # CuPy not installed, no driver: both say so, each of its own
        (None, None, (False, "no NVIDIA driver"), (False, "not installed (pip install")),
        # CuPy installed, no driver: CuPy is there; the driver is what is missing (the
        # runtime's "insufficient driver" is not shown as CuPy missing)
        (
            _cupy(INSUFFICIENT),
            None,
            (False, "no NVIDIA driver (libcuda.so.1 not found)"),
            (True, "cupy 14.2.0 installed (it needs a driver and a GPU: see driver / GPU)"),
        ),
        # a driver without a visible GPU
        (
            _cupy("cudaErrorNoDevice"),
            StandInLibcuda(init=100),
            (False, "driver for CUDA 13.0, but no GPU"),
            (True, "cupy 14.2.0 installed"),
        ),
        # a GPU, and a CuPy that cannot use this driver: CuPy's row says why
        (
            _cupy(INSUFFICIENT),
            StandInLibcuda(("NVIDIA H200",)),
            (True, "driver for CUDA 13.0; 1 GPU: NVIDIA H200"),
            (
                False,
                f"cupy 14.2.0 is installed but cannot use the driver (CUDA 13.0): {INSUFFICIENT}",
            ),
        ),
        (
            _cupy(None),
            StandInLibcuda(("NVIDIA H200",)),
            (True, "driver for CUDA 13.0; 1 GPU: NVIDIA H200"),
            (True, "cupy 14.2.0, CUDA runtime 13020, 1 device(s)"),
        ),
    ],
)
def test_doctor_rows_name_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    cupy: types.ModuleType | None,
    libcuda: StandInLibcuda | None,
    driver_row: tuple[bool, str],
    cupy_row: tuple[bool, str],
) -> None:
    from ctune.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "cupy", cupy)  # None: not installed
    load = _no_libcuda if libcuda is None else (lambda _name: libcuda)
    real_probe = doctor_module.probe_driver
    monkeypatch.setattr(
        doctor_module, "probe_driver", lambda environ=None: real_probe(load, environ)
    )
    out = io.StringIO()
    quiet = contextlib.redirect_stderr(io.StringIO())
    with contextlib.redirect_stdout(out), quiet, contextlib.suppress(SystemExit):
        main(["doctor", "--json"], environ={"PATH": "/usr/bin:/bin"})
    rows = {r["name"]: r for r in json.loads(out.getvalue())["checks"]}
    for name, (ok, detail) in (("driver / GPU", driver_row), ("CuPy", cupy_row)):
        assert rows[name]["ok"] is ok and rows[name]["detail"].startswith(detail), rows[name]


def test_this_machines_driver_row() -> None:
    """The real libcuda: a driver / GPU row whatever this machine has; without a driver it
    says so, not that CuPy is missing."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        driver = probe_driver()
        assert not driver.loaded and "libcuda.so.1 not found" in driver.problem
    else:
        driver = probe_driver()
        assert driver.loaded and (driver.gpus or "no GPU" in driver.problem)
