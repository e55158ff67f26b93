"""What the device says: CUDA error classes, throttle reasons, telemetry, identity.

The classification table is pure and CPU-tested. Sticky errors (rule R1: illegal address,
trap, device assert, ...) leave the context unusable for the rest of the process, so the
worker reports them and exits; launch errors (R2: bad configuration, too many resources)
leave it intact and the worker carries on. Unknown errors count as sticky: replacing a
worker is cheap next to trusting a dead context. NVML is imported inside functions only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ctune.records import DeviceInfo, Outcome

log = logging.getLogger(__name__)

STICKY_ERRORS = frozenset(
    {
        "cudaErrorIllegalAddress",
        "cudaErrorLaunchFailure",
        "cudaErrorAssert",
        "cudaErrorIllegalInstruction",
        "cudaErrorMisalignedAddress",
        "cudaErrorInvalidAddressSpace",
        "cudaErrorInvalidPc",
        "cudaErrorHardwareStackError",
        "cudaErrorLaunchTimeout",
        "cudaErrorECCUncorrectable",
        "cudaErrorNvlinkUncorrectable",
        "cudaErrorContextIsDestroyed",
        "cudaErrorIllegalState",
        "cudaErrorTensorMemoryLeak",
        "cudaErrorUnknown",
    }
)
LAUNCH_ERRORS = frozenset(
    {
        "cudaErrorInvalidConfiguration",
        "cudaErrorLaunchOutOfResources",
        "cudaErrorInvalidValue",
        "cudaErrorMemoryAllocation",
        "cudaErrorInvalidDeviceFunction",
        "cudaErrorNoKernelImageForDevice",
        "cudaErrorInvalidKernelImage",
        "cudaErrorInvalidPtx",
        "cudaErrorUnsupportedPtxVersion",
        "cudaErrorSymbolNotFound",
        "cudaErrorSharedObjectSymbolNotFound",
        "cudaErrorCooperativeLaunchTooLarge",
        "cudaErrorInvalidResourceHandle",
        "cudaErrorInvalidClusterSize",
        "cudaErrorNotSupported",
        "cudaErrorLaunchIncompatibleTexturing",
    }
)
#: driver API names whose runtime twin is not the plain CamelCase conversion
_DRIVER_NAMES = {
    "CUDA_ERROR_LAUNCH_FAILED": "cudaErrorLaunchFailure",
    "CUDA_ERROR_OUT_OF_MEMORY": "cudaErrorMemoryAllocation",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "cudaErrorNoKernelImageForDevice",
    "CUDA_ERROR_INVALID_IMAGE": "cudaErrorInvalidKernelImage",
    "CUDA_ERROR_NOT_FOUND": "cudaErrorSymbolNotFound",
    "CUDA_ERROR_INVALID_HANDLE": "cudaErrorInvalidResourceHandle",
    "CUDA_ERROR_ECC_UNCORRECTABLE": "cudaErrorECCUncorrectable",
    "CUDA_ERROR_INVALID_PC": "cudaErrorInvalidPc",
    "CUDA_ERROR_INVALID_PTX": "cudaErrorInvalidPtx",
    "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND": "cudaErrorSharedObjectSymbolNotFound",
    "CUDA_ERROR_NVLINK_UNCORRECTABLE": "cudaErrorNvlinkUncorrectable",
}
_NAME_RE = re.compile(r"\b(cudaError[A-Za-z0-9]+|CUDA_ERROR_[A-Z0-9_]+)\b")
_OOM_RE = re.compile(r"out of memory|OutOfMemoryError", re.IGNORECASE)
_LIBRARY_RE = re.compile(r"\b(CUBLAS|CUSOLVER|CUFFT|CURAND|CUSPARSE)_STATUS_[A-Z_]+")


@dataclass(frozen=True, slots=True)
class FaultClass:
    outcome: Outcome  # RUNTIME_FAULT or LAUNCH_ERROR
    sticky: bool  # the context is dead: report, exit, let the parent replace the worker
    name: str  # the CUDA error name, or what the text matched


def runtime_name(name: str) -> str:
    """``CUDA_ERROR_ILLEGAL_ADDRESS`` -> ``cudaErrorIllegalAddress``; runtime names pass through."""
    if name.startswith("cudaError"):
        return name
    if name in _DRIVER_NAMES:
        return _DRIVER_NAMES[name]
    words = name[len("CUDA_ERROR_") :].split("_")
    return "cudaError" + "".join(w.capitalize() for w in words if w)


def cuda_error_name(text: str) -> str | None:
    match = _NAME_RE.search(text)
    return runtime_name(match.group(1)) if match else None


def classify_cuda_error(text: str) -> FaultClass | None:
    """Classify an error message; None when it is not a CUDA/device error at all."""
    name = cuda_error_name(text)
    if name is not None:
        if name in LAUNCH_ERRORS:
            return FaultClass(Outcome.LAUNCH_ERROR, False, name)
        return FaultClass(Outcome.RUNTIME_FAULT, True, name)
    if _OOM_RE.search(text):
        return FaultClass(Outcome.LAUNCH_ERROR, False, "out of memory")
    library = _LIBRARY_RE.search(text)
    if library:
        # a math library failing after a kernel ran usually reports a dead context
        return FaultClass(Outcome.RUNTIME_FAULT, True, library.group(0))
    return None


def classify_exception(exc: BaseException) -> FaultClass | None:
    return classify_cuda_error(f"{type(exc).__name__}: {exc}")


# --- clocks-event (throttle) reasons -------------------------------------------
# NVML bit values (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*)
GPU_IDLE = 0x1
APPLICATIONS_CLOCKS = 0x2
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SYNC_BOOST = 0x10
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
#: samples taken under these are excluded (rule M2); SW power capping is not:
#: a sustained tensor-core GEMM sits at the power cap by nature (docs/design.md)
EXCLUDING_REASONS = (
    HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN
)
_REASON_NAMES = {
    GPU_IDLE: "idle",
    APPLICATIONS_CLOCKS: "applications-clocks",
    SW_POWER_CAP: "sw-power-cap",
    HW_SLOWDOWN: "hw-slowdown",
    SYNC_BOOST: "sync-boost",
    SW_THERMAL_SLOWDOWN: "sw-thermal",
    HW_THERMAL_SLOWDOWN: "hw-thermal",
    HW_POWER_BRAKE_SLOWDOWN: "hw-power-brake",
}


def excluding(reasons: int) -> bool:
    return bool(reasons & EXCLUDING_REASONS)


def describe_reasons(reasons: int) -> str:
    names = [name for bit, name in _REASON_NAMES.items() if reasons & bit]
    other = reasons & ~sum(_REASON_NAMES)
    if other:
        names.append(hex(other))
    return ", ".join(names) or "none"


# --- telemetry (NVML) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Edge:
    """One read at a chunk edge: SM clock and the clocks-event reason bitmask."""

    sm_clock_mhz: float | None
    reasons: int


class Telemetry:
    """NVML reads for one device; every read degrades to None/0 instead of raising."""

    def __init__(self, handle: Any) -> None:
        import pynvml

        self._nvml = pynvml
        self.handle = handle
        self._reasons_fn = (
            getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )

    @classmethod
    def open(cls, pci_bus_id: str | None, index: int) -> Telemetry | None:
        """NVML handle for the CUDA device (matched by PCI bus id), or None without NVML."""
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = None
            if pci_bus_id:
                try:
                    handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
                except pynvml.NVMLError:
                    handle = None
            if handle is None:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            return cls(handle)
        except Exception as exc:  # ImportError, NVMLError, missing library
            log.warning("NVML unavailable (%s): clocks and throttling are not checked", exc)
            return None

    def edge(self) -> Edge:
        nvml = self._nvml
        try:
            clock: float | None = float(
                nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM)
            )
        except Exception:
            clock = None
        try:
            reasons = int(self._reasons_fn(self.handle))
        except Exception:
            reasons = 0
        return Edge(clock, reasons)

    def temperature_c(self) -> float | None:
        nvml = self._nvml
        try:
            return float(nvml.nvmlDeviceGetTemperature(self.handle, nvml.NVML_TEMPERATURE_GPU))
        except Exception:
            return None

    def compute_pids(self) -> set[int] | None:
        try:
            return {
                int(p.pid) for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
            }
        except Exception:
            return None

    def other_processes(self, own_pids: Iterable[int]) -> int:
        pids = self.compute_pids()
        return len(pids - set(own_pids)) if pids else 0


# --- identity -----------------------------------------------------------------------


def format_uuid(raw: bytes | str | None) -> str:
    """CUDA's 16 raw UUID bytes as NVML writes them: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    h = bytes(raw).hex()
    if len(h) != 32:
        return h
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def probe_device_info(cupy: Any, index: int, telemetry: Telemetry | None) -> DeviceInfo:
    """Name, UUID, SM, driver, SM count, memory and L2 size of the worker's device."""
    props = cupy.cuda.runtime.getDeviceProperties(index)
    name = _text(props.get("name", "")).strip()
    uuid = format_uuid(props.get("uuid"))
    driver = ""
    if telemetry is not None:
        nvml = telemetry._nvml
        try:
            name = _text(nvml.nvmlDeviceGetName(telemetry.handle)) or name
            uuid = _text(nvml.nvmlDeviceGetUUID(telemetry.handle)) or uuid
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception as exc:
            log.warning("NVML identity reads failed: %s", exc)
    if not driver:
        version = int(cupy.cuda.runtime.driverGetVersion())
        driver = f"cuda {version // 1000}.{(version % 1000) // 10}"
    return DeviceInfo(
        name=name,
        uuid=uuid,
        sm=f"sm_{props['major']}{props['minor']}",
        driver=driver,
        sm_count=int(props.get("multiProcessorCount", 0)),
        memory_bytes=int(props.get("totalGlobalMem", 0)),
        l2_bytes=int(props.get("l2CacheSize", 0)),
    )


__all__ = [
    "EXCLUDING_REASONS",
    "GPU_IDLE",
    "HW_SLOWDOWN",
    "LAUNCH_ERRORS",
    "STICKY_ERRORS",
    "SW_POWER_CAP",
    "Edge",
    "FaultClass",
    "Telemetry",
    "classify_cuda_error",
    "classify_exception",
    "cuda_error_name",
    "describe_reasons",
    "excluding",
    "format_uuid",
    "probe_device_info",
    "runtime_name",
]
