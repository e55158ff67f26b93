"""The ``device`` gene family: genes that set the GPU, not the build.

``--device-genes clocks,power_limit`` adds ``sm_clock_mhz`` and/or ``power_limit_w``, with
values read from the device and ``0`` (as found) as the default build's, so the baseline is
the GPU as the user runs it. They never reach nvcc, so they share builds, but the binary
identity includes them. :class:`DeviceGeneMeasurer` wraps a search's measurer: the parent
applies a candidate's device genes around the inner measurement and restores after it; the
worker never touches NVML settings (docs/search.md, "Device genes").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctune.measure import Measurer
from ctune.measure.device_settings import AS_FOUND, DeviceLimits, DeviceSetting
from ctune.spec.model import DEVICE_GENES
from ctune.spec.space.params import Gene

if TYPE_CHECKING:
    from ctune.measure import SamplingPlan
    from ctune.measure.device_control import DeviceControl
    from ctune.measure.device_settings import Settled
    from ctune.records import Build, Candidate, Measurement
    from ctune.spec import KernelSpec, Problem

DEVICE_FAMILY = "device"


def device_genes(kinds: Sequence[str], limits: DeviceLimits) -> tuple[Gene, ...]:
    """The genes ``--device-genes`` adds, in a fixed order (clocks, then power limit)."""
    made = {
        "clocks": Gene(
            DEVICE_GENES["clocks"],
            limits.clock_values(),
            AS_FOUND,
            DEVICE_FAMILY,
            description="locked SM clock in MHz (0: not locked)",
        ),
        "power_limit": Gene(
            DEVICE_GENES["power_limit"],
            limits.power_values(),
            AS_FOUND,
            DEVICE_FAMILY,
            description="board power limit in W (0: the limit found at start)",
        ),
    }
    return tuple(made[k] for k in DEVICE_GENES if k in kinds)


def with_device_genes(spec: KernelSpec, genes: Sequence[Gene]) -> KernelSpec:
    """``spec`` whose space also holds ``genes``; a name the spec already uses is refused."""
    from ctune.errors import UserError

    clash = [g.name for g in genes if g.name in spec.space]
    if clash:
        raise UserError(
            f"{spec.yaml_path}: gene {', '.join(clash)} is also a device gene "
            "(--device-genes adds it); rename the spec's gene"
        )
    return dataclasses.replace(spec, genes=spec.genes + tuple(genes))


def setting_of(spec: KernelSpec, candidate: Candidate) -> DeviceSetting:
    values = {k: v for k, v in candidate.genes if spec.space.gene(k).device}
    return DeviceSetting.from_values(values)


def _noted(m: Measurement, setting: DeviceSetting, settled: Settled) -> Measurement:
    state = "settled" if settled.settled else "did NOT settle (throttled or capped)"
    note = (
        f"device: {setting.text()}; SM clock {settled.observed_mhz} MHz before timing, "
        f"{state} after {settled.waited_s:.2f} s"
    )
    joined = f"{m.sampling_note}; {note}" if m.sampling_note else note
    return dataclasses.replace(m, sampling_note=joined)


class DeviceGeneMeasurer(Measurer):
    """A measurer that applies each candidate's device genes around ``inner``'s work; every
    other part of the contract is ``inner``'s."""

    def __init__(self, inner: Measurer, control: DeviceControl) -> None:
        self.inner = inner
        self.control = control

    def __getattr__(self, name: str) -> Any:  # what is not the contract's: the inner one's
        return getattr(self.inner, name)

    @property
    def device_name(self) -> str | None:  # type: ignore[override]
        return self.inner.device_name

    @property
    def capabilities(self) -> frozenset[str] | None:  # type: ignore[override]
        return self.inner.capabilities

    @property
    def slots(self) -> int:  # type: ignore[override]
        return self.inner.slots

    @property
    def baseline_s(self) -> float | None:
        return self.inner.baseline_s

    def set_baseline(self, seconds: float | None) -> None:
        self.inner.set_baseline(seconds)

    def prestart(self, count: int, wait: bool = True) -> None:
        self.inner.prestart(count, wait)

    def set_up_ahead(
        self, spec: KernelSpec, candidate: Candidate, problem: Problem, plan: SamplingPlan
    ) -> None:
        self.inner.set_up_ahead(spec, candidate, problem, plan)

    def fingerprint_fields(self) -> dict[str, str] | None:
        return self.inner.fingerprint_fields()

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        setting = setting_of(spec, candidate)
        if setting.is_as_found:
            return self.inner.measure(spec, candidate, build, problem, plan)
        with self.control.applied(setting) as settled:
            m = self.inner.measure(spec, candidate, build, problem, plan)
        return _noted(m, setting, settled)

    def remeasure(
        self,
        spec: KernelSpec,
        items: Sequence[tuple[Candidate, Build]],
        problem: Problem,
        plan: SamplingPlan,
        processes: int,
        *,
        seed: int | None = None,
    ) -> dict[str, list[Measurement]]:
        """Fresh-process re-measurement, one device setting at a time (a setting is applied
        once per group, not per sample: a clock change needs its settle wait)."""
        groups: dict[DeviceSetting, list[tuple[Candidate, Build]]] = {}
        for item in items:
            groups.setdefault(setting_of(spec, item[0]), []).append(item)
        out: dict[str, list[Measurement]] = {}
        for setting, group in groups.items():
            if setting.is_as_found:
                out.update(self.inner.remeasure(spec, group, problem, plan, processes, seed=seed))
                continue
            with self.control.applied(setting) as settled:
                got = self.inner.remeasure(spec, group, problem, plan, processes, seed=seed)
            out.update({k: [_noted(m, setting, settled) for m in ms] for k, ms in got.items()})
        return out

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.control.close()


__all__ = [
    "DEVICE_FAMILY",
    "DeviceGeneMeasurer",
    "device_genes",
    "setting_of",
    "with_device_genes",
]
