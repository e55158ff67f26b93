"""What this machine has for ctune: toolchain, GPU, NVML, CuPy, CUTLASS. Probes on call only."""

from __future__ import annotations

import platform
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    needed_for: str  # what cannot work without it


def _toolchain(nvcc: str) -> list[Check]:
    from ctune.compile.toolchain import probe_toolchain
    from ctune.errors import ToolchainError

    try:
        tc = probe_toolchain(nvcc)
    except ToolchainError as exc:
        return [Check("nvcc / ptxas", False, str(exc), "compile, search, check")]
    return [Check("nvcc / ptxas", True, f"{tc.describe()} at {tc.nvcc}", "compile, search, check")]


def _nvml() -> list[Check]:
    try:
        import pynvml
    except ImportError:
        return [Check("NVML", False, "nvidia-ml-py is not installed", "energy/power objectives")]
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return [Check("NVML", False, f"nvmlInit failed: {exc}", "GPU fingerprint, energy")]
    checks = []
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        count = pynvml.nvmlDeviceGetCount()
        names = []
        for i in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            names.append(str(pynvml.nvmlDeviceGetName(handle)))
        checks.append(
            Check(
                "driver / GPUs", count > 0, f"driver {driver}; " + ", ".join(names), "measurement"
            )
        )
        if count:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            try:
                energy = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
                checks.append(
                    Check(
                        "NVML energy counter",
                        True,
                        f"{energy} mJ since driver load",
                        "energy/power objectives",
                    )
                )
            except Exception as exc:
                checks.append(
                    Check("NVML energy counter", False, str(exc), "energy/power objectives")
                )
            try:
                sm = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
                limit = pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000
                checks.append(
                    Check(
                        "clocks / power limit",
                        True,
                        f"SM {sm} MHz, limit {limit:.0f} W",
                        "throttle detection",
                    )
                )
            except Exception as exc:
                checks.append(Check("clocks / power limit", False, str(exc), "throttle detection"))
    finally:
        pynvml.nvmlShutdown()
    return checks


def _cupy() -> list[Check]:
    try:
        import cupy
    except ImportError:
        return [Check("CuPy", False, "not installed (pip install 'ctune[cuda13]')", "measurement")]
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        runtime = cupy.cuda.runtime.runtimeGetVersion()
    except Exception as exc:
        return [Check("CuPy", False, f"cupy {cupy.__version__}: {exc}", "measurement")]
    return [
        Check(
            "CuPy",
            count > 0,
            f"cupy {cupy.__version__}, CUDA runtime {runtime}, {count} device(s)",
            "measurement",
        )
    ]


def _cutlass() -> list[Check]:
    from ctune.compile.deps import cutlass_include_dir, cutlass_version

    path = cutlass_include_dir()
    return [
        Check(
            "CUTLASS headers",
            path is not None,
            f"nvidia-cutlass {cutlass_version()} at {path}"
            if path
            else "pip install nvidia-cutlass",
            "CUTLASS kernels",
        )
    ]


def run_checks(nvcc: str = "nvcc") -> list[Check]:
    checks = [Check("python", True, platform.python_version(), "everything")]
    for probe in (lambda: _toolchain(nvcc), _cutlass, _cupy, _nvml):
        checks.extend(probe())
    return checks
