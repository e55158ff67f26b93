"""Device genes: a locked SM clock and a board power limit, set through NVML around a
measurement and always put back.

These two move energy per call more than any compiler flag, and NVML sets both for the
whole GPU; their values come from the device, never from a table. Permission is probed
before anything changes, and restore never depends on the worker: the parent restores in
a ``finally`` and :mod:`ctune.measure.device_guardian` when the parent's pipe closes
(docs/search.md, "Device genes"). ``pynvml`` is imported inside functions only; tests pass
a stand-in library spec (``ctune.testing.standin_nvml:STATE``) so no test changes a GPU.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctune.errors import ToolchainError, UserError
from ctune.spec.model import DEVICE_GENES

#: a device gene's value meaning "leave it as found" (clocks unlocked; the limit at start)
AS_FOUND = 0
CLOCK_CHOICES = 7  # locked clocks offered, evenly spaced from the top down to half of it
POWER_CHOICES = 5  # power limits offered, evenly spaced over the allowed range
POWER_STEP_W = 5
SETTLE_TIMEOUT_S = 2.0
SETTLE_POLL_S = 0.05
SETTLE_TOLERANCE_MHZ = 15  # one step of the supported-clock table


def parse_device_genes(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"clocks,power_limit"`` -> ("clocks", "power_limit"); unknown names: one UserError."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    kinds = tuple(dict.fromkeys(p.strip() for p in parts if p.strip()))
    unknown = [k for k in kinds if k not in DEVICE_GENES]
    if unknown or not kinds:
        raise UserError(
            f"--device-genes {','.join(parts)!r}: unknown {', '.join(unknown) or 'empty list'} "
            f"(allowed: {', '.join(DEVICE_GENES)}, comma-separated)"
        )
    return kinds


@dataclass(frozen=True, slots=True)
class DeviceSetting:
    """One candidate's device genes; None (or AS_FOUND) leaves that knob as found."""

    sm_clock_mhz: int | None = None
    power_limit_w: int | None = None

    @staticmethod
    def from_values(values: dict[str, Any]) -> DeviceSetting:
        clock = int(values.get(DEVICE_GENES["clocks"], AS_FOUND) or AS_FOUND)
        power = int(values.get(DEVICE_GENES["power_limit"], AS_FOUND) or AS_FOUND)
        return DeviceSetting(clock or None, power or None)

    @property
    def is_as_found(self) -> bool:
        return self.sm_clock_mhz is None and self.power_limit_w is None

    def text(self) -> str:
        parts = []
        if self.sm_clock_mhz is not None:
            parts.append(f"SM clock locked at {self.sm_clock_mhz} MHz")
        if self.power_limit_w is not None:
            parts.append(f"power limit {self.power_limit_w} W")
        return ", ".join(parts) or "as found"

    def nvidia_smi(self, gpu: int = 0) -> str:
        """The command line that applies this setting by hand (needs root)."""
        args = [f"nvidia-smi -i {gpu}"]
        if self.sm_clock_mhz is not None:
            args.append(f"--lock-gpu-clocks={self.sm_clock_mhz},{self.sm_clock_mhz}")
        if self.power_limit_w is not None:
            args.append(f"--power-limit={self.power_limit_w}")
        return " ".join(args) if len(args) > 1 else ""

    def nvml_calls(self) -> list[str]:
        """The same through NVML (pynvml names; the limit in mW), for a program to apply."""
        calls = []
        if self.sm_clock_mhz is not None:
            mhz = self.sm_clock_mhz
            calls.append(f"nvmlDeviceSetGpuLockedClocks(handle, {mhz}, {mhz})")
        if self.power_limit_w is not None:
            calls.append(f"nvmlDeviceSetPowerManagementLimit(handle, {self.power_limit_w * 1000})")
        return calls

    def restore_line(self, gpu: int = 0) -> str:
        """How to put the GPU back afterwards (the power limit: its default)."""
        args = [f"nvidia-smi -i {gpu}"]
        if self.sm_clock_mhz is not None:
            args.append("--reset-gpu-clocks")
        if self.power_limit_w is not None:
            args.append("--power-limit=<the default: nvidia-smi -q -d POWER>")
        return " ".join(args) if len(args) > 1 else ""


@dataclass(frozen=True, slots=True)
class DeviceLimits:
    """What the device allows, read from NVML."""

    sm_clocks_mhz: tuple[int, ...]  # supported graphics clocks, highest first
    power_min_w: float
    power_max_w: float
    power_default_w: float

    def clock_values(self, n: int = CLOCK_CHOICES) -> tuple[int, ...]:
        """AS_FOUND plus ``n`` supported clocks from the top down to half of it (lower
        clocks cost more time than they save energy on any kernel worth tuning)."""
        top = max(self.sm_clocks_mhz)
        usable = sorted((c for c in self.sm_clocks_mhz if c >= top / 2), reverse=True)
        return (AS_FOUND, *_spread(usable, n))

    def power_values(self, n: int = POWER_CHOICES) -> tuple[int, ...]:
        """AS_FOUND plus ``n`` limits over the allowed range, in whole POWER_STEP_W steps."""
        low = POWER_STEP_W * -(-int(self.power_min_w) // POWER_STEP_W)
        high = POWER_STEP_W * (int(self.power_max_w) // POWER_STEP_W)
        if high <= low:
            return (AS_FOUND, low)
        step = (high - low) / max(n - 1, 1)
        values = {POWER_STEP_W * round((high - i * step) / POWER_STEP_W) for i in range(n)}
        return (AS_FOUND, *sorted(values, reverse=True))


def _spread(values: Sequence[int], n: int) -> tuple[int, ...]:
    if len(values) <= n:
        return tuple(values)
    picks = sorted({round(i * (len(values) - 1) / (n - 1)) for i in range(n)})
    return tuple(values[i] for i in picks)


def load_nvml(spec: str = "pynvml") -> Any:
    """The NVML library: ``pynvml``, or ``module:ARG`` whose ``library(ARG)`` returns a
    pynvml-shaped object (the stand-in for tests). A guardian process gets the same spec."""
    module_name, _, arg = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolchainError(
            f"device genes need NVML: {module_name} does not import ({exc}); "
            "pip install nvidia-ml-py"
        ) from None
    return module.library(arg) if arg else module


class NvmlDevice:
    """The one place device settings call NVML: read limits, set, reset, read the clock."""

    def __init__(self, lib: Any, index: int = 0) -> None:
        self.lib, self.index = lib, index
        try:
            lib.nvmlInit()
            self.handle = lib.nvmlDeviceGetHandleByIndex(index)
        except lib.NVMLError as exc:
            raise ToolchainError(f"device genes need NVML on GPU {index}: {exc}") from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.lib.nvmlShutdown()

    def limits(self) -> DeviceLimits:
        lib, h = self.lib, self.handle
        mem = max(lib.nvmlDeviceGetSupportedMemoryClocks(h))
        clocks = tuple(sorted(set(lib.nvmlDeviceGetSupportedGraphicsClocks(h, mem)), reverse=True))
        low, high = lib.nvmlDeviceGetPowerManagementLimitConstraints(h)
        default = lib.nvmlDeviceGetPowerManagementDefaultLimit(h)
        return DeviceLimits(clocks, low / 1000.0, high / 1000.0, default / 1000.0)

    def power_limit_mw(self) -> int:
        return int(self.lib.nvmlDeviceGetPowerManagementLimit(self.handle))

    def sm_clock_mhz(self) -> int:
        return int(self.lib.nvmlDeviceGetClockInfo(self.handle, self.lib.NVML_CLOCK_SM))

    def mig_enabled(self) -> bool:
        try:
            return bool(self.lib.nvmlDeviceGetMigMode(self.handle)[0])
        except self.lib.NVMLError_NotSupported:
            return False

    def compute_processes(self) -> int:
        return len(self.lib.nvmlDeviceGetComputeRunningProcesses(self.handle))

    def set_power_limit_mw(self, milliwatts: int) -> None:
        self.lib.nvmlDeviceSetPowerManagementLimit(self.handle, int(milliwatts))

    def lock_clocks(self, mhz: int) -> None:
        self.lib.nvmlDeviceSetGpuLockedClocks(self.handle, int(mhz), int(mhz))

    def reset_clocks(self) -> None:
        self.lib.nvmlDeviceResetGpuLockedClocks(self.handle)


def _refusal(kinds: Sequence[str], why: str) -> ToolchainError:
    return ToolchainError(
        f"--device-genes {','.join(kinds)}: {why}; run the search with --device-genes none "
        "(it tunes the rest), or on a GPU of your own as root"
    )


def check_permitted(device: NvmlDevice, kinds: Sequence[str]) -> None:
    """Refuse (ToolchainError, exit 3) where ctune may not change the device; see the module
    docstring for why each probe is safe."""
    gpu = f"GPU {device.index}"
    if device.mig_enabled():
        raise _refusal(kinds, f"{gpu} is in MIG mode (clocks and power belong to the whole GPU)")
    others = device.compute_processes()
    if others:
        raise _refusal(kinds, f"{gpu} runs {others} other compute process(es): a shared GPU")
    lib = device.lib
    try:
        if "power_limit" in kinds:
            device.set_power_limit_mw(device.power_limit_mw())  # the value it already has
        if "clocks" in kinds:
            device.reset_clocks()  # what restore does: unlocked
    except lib.NVMLError_NoPermission:
        raise _refusal(kinds, f"NVML does not permit changing {gpu} (not root?)") from None
    except lib.NVMLError_NotSupported:
        raise _refusal(kinds, f"{gpu} does not support setting {' and '.join(kinds)}") from None
    except lib.NVMLError as exc:
        raise _refusal(kinds, f"NVML refused the permission probe on {gpu} ({exc})") from None


@dataclass(frozen=True, slots=True)
class AsFound:
    """What restore puts back: the power limit at start; clocks unlocked."""

    power_limit_mw: int | None  # None: power-limit genes not in use, leave it alone
    clocks: bool  # clock genes in use: reset locked clocks on restore


def restore(device: NvmlDevice, found: AsFound) -> None:
    """Put the device back; both calls are tried even if the first fails."""
    errors = []
    limit = found.power_limit_mw
    steps = [device.reset_clocks] if found.clocks else []
    if limit is not None:
        steps.append(lambda: device.set_power_limit_mw(limit))
    for step in steps:
        try:
            step()
        except Exception as exc:  # one failed call must not skip the other
            errors.append(str(exc))
    if errors:
        raise ToolchainError(f"restoring GPU {device.index} failed: {'; '.join(errors)}")


@dataclass(frozen=True, slots=True)
class Settled:
    """The clock observed once a setting took hold (or the wait ran out)."""

    observed_mhz: int
    settled: bool  # False: the clock never reached the locked value (throttled, capped)
    waited_s: float


def wait_settled(
    device: NvmlDevice,
    target_mhz: int | None,
    timeout_s: float = SETTLE_TIMEOUT_S,
    poll_s: float = SETTLE_POLL_S,
) -> Settled:
    """Poll the SM clock until two reads in a row sit at the target (within one table
    step). No target (power limit only): the clock that is there. Never raises on a clock
    that does not settle: the observed value is recorded instead."""
    start = time.monotonic()
    observed = device.sm_clock_mhz()
    if target_mhz is None:
        return Settled(observed, True, 0.0)
    hits = 0
    while True:
        hits = hits + 1 if abs(observed - target_mhz) <= SETTLE_TOLERANCE_MHZ else 0
        waited = time.monotonic() - start
        if hits >= 2 or waited >= timeout_s:
            return Settled(observed, hits >= 2, waited)
        time.sleep(poll_s)
        observed = device.sm_clock_mhz()


__all__ = [
    "AS_FOUND",
    "AsFound",
    "DeviceLimits",
    "DeviceSetting",
    "NvmlDevice",
    "Settled",
    "check_permitted",
    "load_nvml",
    "parse_device_genes",
    "restore",
    "wait_settled",
]
