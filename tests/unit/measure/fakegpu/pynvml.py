"""A stand-in for the slice of NVML (nvidia-ml-py's ``pynvml``) the worker reads.

The energy counter advances in 100 ms ticks at a steady 300 W, like the H200's
counter (docs/design.md); ``FAKE_NVML_REASONS`` (hex) sets the clocks-event reasons.
"""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0
_START = time.monotonic()


class NVMLError(Exception):
    pass


def nvmlInit() -> None:
    pass


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetHandleByPciBusId(bus_id: str) -> str:
    return "handle"


def nvmlDeviceGetHandleByIndex(index: int) -> str:
    return "handle"


def nvmlDeviceGetClockInfo(handle: str, clock: int) -> int:
    return 1980


def nvmlDeviceGetCurrentClocksEventReasons(handle: str) -> int:
    return int(os.environ.get("FAKE_NVML_REASONS", "0"), 16)


def nvmlDeviceGetTemperature(handle: str, sensor: int) -> int:
    return 41


def nvmlDeviceGetComputeRunningProcesses(handle: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(pid=os.getpid())]


def nvmlDeviceGetName(handle: str) -> str:
    return "Fake H100 80GB HBM3"


def nvmlDeviceGetUUID(handle: str) -> str:
    return "GPU-fake-0000"


def nvmlSystemGetDriverVersion() -> str:
    return "580.0.fake"


def nvmlDeviceGetTotalEnergyConsumption(handle: str) -> int:
    time.sleep(0.004)  # one read costs ~4.3 ms on the H200
    ticks = int((time.monotonic() - _START) / 0.1)
    return ticks * 30_000  # 300 W x 0.1 s, in mJ


def nvmlDeviceGetEnforcedPowerLimit(handle: str) -> int:
    return 700_000


# --- what the fingerprint's probe reads (ctune.evidence.identity.probe_gpu) ---


def nvmlDeviceGetCount() -> int:
    return 1


def nvmlDeviceGetCudaComputeCapability(handle: str) -> tuple[int, int]:
    return 9, 0


def nvmlDeviceGetMemoryInfo(handle: str) -> SimpleNamespace:
    return SimpleNamespace(total=80 << 30, free=79 << 30, used=1 << 30)


def _not_supported(*args: object) -> None:
    raise NVMLError("Not Supported")


nvmlDeviceGetAttributes = _not_supported  # MIG-only on H100/H200
nvmlDeviceGetEccMode = _not_supported
nvmlDeviceGetMigMode = _not_supported
nvmlDeviceGetComputeMode = _not_supported
nvmlDeviceGetPowerManagementLimit = _not_supported
nvmlDeviceGetApplicationsClock = _not_supported
