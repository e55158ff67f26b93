"""StandInNvml: a pynvml-shaped library for unit-testing device settings without a GPU.

It is not NVML and decides nothing about performance: it keeps the few
numbers ctune's device-settings code reads and writes (supported clocks, the
power-limit range, the locked clock, the power limit) in a JSON file, so that
a guardian process started by a test sees and changes the same "device" as
the test. The lent GPU machines must never have their clocks or power limit
changed, so this stand-in is the only place the apply/restore logic runs in
the test suite.

Load it where ctune takes an NVML library spec:
``"ctune.testing.standin_nvml:/path/state.json"`` (see
:func:`ctune.measure.device_settings.load_nvml`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

NVML_CLOCK_SM = 1
MHZ_H100 = tuple(range(1980, 330, -15))  # 1980 ... 345 MHz: the H100 SXM's steps


class StandInNvmlError(Exception):
    """The stand-in's NVMLError."""


class StandInNoPermission(StandInNvmlError):
    """Setting needs root (or the GPU is shared / in MIG mode)."""


class StandInNotSupported(StandInNvmlError):
    """The stand-in device does not support the call (e.g. MIG mode on a non-MIG GPU)."""


@dataclass
class StandInNvmlState:
    """What the stand-in device holds; every field is what a test sets up or checks."""

    sm_clocks_mhz: list[int] = field(default_factory=lambda: list(MHZ_H100))
    mem_clocks_mhz: list[int] = field(default_factory=lambda: [2619])
    power_range_mw: list[int] = field(default_factory=lambda: [200_000, 700_000])
    default_power_mw: int = 700_000
    power_mw: int = 700_000
    locked_mhz: list[int] | None = None  # [min, max] while locked
    boost_mhz: int = 1980  # what the clock reads when nothing is locked
    settle_reads: int = 2  # clock reads after a lock before it shows the locked value
    reads_since_lock: int = 0
    throttle_mhz: int | None = None  # a power/thermal cap the clock cannot exceed
    permitted: bool = True
    mig: bool | None = False  # None: MIG not supported on this "GPU"
    other_processes: int = 0
    calls: list[str] = field(default_factory=list)  # every setter call, in order


class StandInNvmlLibrary:
    """The pynvml functions ctune uses, over a :class:`StandInNvmlState` in a JSON file."""

    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVMLError = StandInNvmlError
    NVMLError_NoPermission = StandInNoPermission
    NVMLError_NotSupported = StandInNotSupported

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    # --- state ----------------------------------------------------------------
    @staticmethod
    def create(path: str | Path, **fields: Any) -> StandInNvmlLibrary:
        lib = StandInNvmlLibrary(path)
        lib.save(StandInNvmlState(**fields))
        return lib

    def load(self) -> StandInNvmlState:
        return StandInNvmlState(**json.loads(self.path.read_text()))

    def save(self, state: StandInNvmlState) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state)))
        tmp.replace(self.path)

    def _set(self, call: str, **changes: Any) -> None:
        state = self.load()
        if not state.permitted:
            raise StandInNoPermission(f"Insufficient Permissions ({call})")
        for key, value in changes.items():
            setattr(state, key, value)
        state.calls.append(call)
        self.save(state)

    # --- pynvml's surface -----------------------------------------------------
    def nvmlInit(self) -> None:
        if not self.path.is_file():
            raise StandInNvmlError(f"Driver Not Loaded (no stand-in state at {self.path})")

    def nvmlShutdown(self) -> None:
        return None

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index != 0:
            raise StandInNvmlError(f"Invalid Argument (no GPU {index})")
        return index

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: int) -> list[int]:
        return list(self.load().mem_clocks_mhz)

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: int, mem_mhz: int) -> list[int]:
        return list(self.load().sm_clocks_mhz)

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: int) -> list[int]:
        return list(self.load().power_range_mw)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: int) -> int:
        return self.load().default_power_mw

    def nvmlDeviceGetPowerManagementLimit(self, handle: int) -> int:
        return self.load().power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return self.load().power_mw

    def nvmlDeviceGetMigMode(self, handle: int) -> list[int]:
        mig = self.load().mig
        if mig is None:
            raise StandInNotSupported("Not Supported")
        return [int(mig), int(mig)]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[object]:
        return [object() for _ in range(self.load().other_processes)]

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        state = self.load()
        mhz = state.boost_mhz
        if state.locked_mhz is not None:
            state.reads_since_lock += 1
            self.save(state)
            if state.reads_since_lock > state.settle_reads:
                mhz = state.locked_mhz[1]
        return mhz if state.throttle_mhz is None else min(mhz, state.throttle_mhz)

    def nvmlDeviceSetPowerManagementLimit(self, handle: int, limit_mw: int) -> None:
        low, high = self.load().power_range_mw
        if not low <= limit_mw <= high:
            raise StandInNvmlError(f"Invalid Argument ({limit_mw} mW)")
        self._set(f"power_limit {limit_mw}", power_mw=int(limit_mw))

    def nvmlDeviceSetGpuLockedClocks(self, handle: int, min_mhz: int, max_mhz: int) -> None:
        self._set(
            f"lock_clocks {min_mhz},{max_mhz}",
            locked_mhz=[int(min_mhz), int(max_mhz)],
            reads_since_lock=0,
        )

    def nvmlDeviceResetGpuLockedClocks(self, handle: int) -> None:
        self._set("reset_clocks", locked_mhz=None, reads_since_lock=0)


def library(arg: str) -> StandInNvmlLibrary:
    """The entry :func:`ctune.measure.device_settings.load_nvml` calls with the state path."""
    return StandInNvmlLibrary(arg)


__all__ = [
    "StandInNoPermission",
    "StandInNotSupported",
    "StandInNvmlError",
    "StandInNvmlLibrary",
    "StandInNvmlState",
    "library",
]
