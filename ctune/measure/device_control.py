"""DeviceControl: the measuring parent's hold on the GPU's clocks and power limit.

One per search (it lives as long as the measuring session): on entry it
opens NVML, refuses where changes are not permitted, records what it found
and starts the guardian; ``applied(setting)`` sets one candidate's device
genes, waits for the clock to settle and restores in a ``finally``; on exit it
restores and releases the guardian (which restores once more: restoring is
idempotent, and that second restore is what covers a parent that dies).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType

from ctune.measure.device_guardian import Guardian
from ctune.measure.device_settings import (
    AsFound,
    DeviceLimits,
    DeviceSetting,
    NvmlDevice,
    Settled,
    check_permitted,
    load_nvml,
    restore,
    wait_settled,
)


class DeviceControl:
    """Apply device genes around measurements; always put the device back."""

    def __init__(
        self,
        kinds: Sequence[str],
        device: int = 0,
        nvml_spec: str = "pynvml",
        settle_timeout_s: float = 2.0,
    ) -> None:
        self.kinds = tuple(kinds)
        self.index = device
        self.nvml_spec = nvml_spec
        self.settle_timeout_s = settle_timeout_s
        self._device: NvmlDevice | None = None
        self._guardian: Guardian | None = None
        self._found: AsFound | None = None
        self.limits: DeviceLimits | None = None

    def __enter__(self) -> DeviceControl:
        device = NvmlDevice(load_nvml(self.nvml_spec), self.index)
        try:
            self.limits = device.limits()
            power = device.power_limit_mw() if "power_limit" in self.kinds else None
            found = AsFound(power, "clocks" in self.kinds)
            check_permitted(device, self.kinds)
            self._guardian = Guardian(self.nvml_spec, self.index, found)
        except BaseException:
            device.close()
            raise
        self._device, self._found = device, found
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        device, guardian, found = self._device, self._guardian, self._found
        self._device = self._guardian = None
        if device is None or guardian is None or found is None:
            return
        try:
            restore(device, found)
        finally:
            guardian.release()
            device.close()

    def close(self) -> None:
        """Restore and release the guardian (what leaving the with-block does)."""
        self.__exit__(None, None, None)

    @property
    def guardian_pid(self) -> int | None:
        return None if self._guardian is None else self._guardian.pid

    @contextmanager
    def applied(self, setting: DeviceSetting) -> Iterator[Settled]:
        """Set ``setting``, yield the settled clock, restore afterwards (even on error)."""
        device, found = self._device, self._found
        if device is None or found is None:
            raise RuntimeError("DeviceControl.applied outside its with-block")
        try:
            if setting.power_limit_w is not None:
                device.set_power_limit_mw(setting.power_limit_w * 1000)
            if setting.sm_clock_mhz is not None:
                device.lock_clocks(setting.sm_clock_mhz)
            yield wait_settled(device, setting.sm_clock_mhz, self.settle_timeout_s)
        finally:
            restore(device, found)


__all__ = ["DeviceControl"]
