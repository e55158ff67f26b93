"""The device gene family: the genes --device-genes adds, and a measurer that applies them.

The GPU is StandInMeasurer and the NVML library is StandInNvml: this tests the
wiring (which setting is on the device while a candidate is measured, what is
restored, what the measurement records), never performance.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ctune.errors import UserError
from ctune.measure import SamplingPlan
from ctune.measure.device_control import DeviceControl
from ctune.measure.device_genes import (
    DeviceGeneMeasurer,
    device_genes,
    setting_of,
    with_device_genes,
)
from ctune.measure.device_settings import AS_FOUND, DeviceLimits, DeviceSetting
from ctune.records import Build, Candidate, Measurement
from ctune.search.dedup import binary_identity
from ctune.spec import KernelSpec, Problem
from ctune.spec.space.params import Gene
from ctune.testing.standin_nvml import StandInNvmlLibrary
from ctune.testing.standins import StandInCompiler, StandInMeasurer, standin_spec

LIMITS = DeviceLimits(tuple(range(1980, 330, -15)), 200.0, 700.0, 700.0)


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    base = standin_spec(tmp_path / "k")
    return with_device_genes(base, device_genes(("clocks", "power_limit"), LIMITS))


@pytest.fixture
def nvml(tmp_path: Path) -> StandInNvmlLibrary:
    return StandInNvmlLibrary.create(tmp_path / "nvml.json", power_mw=650_000)


@pytest.fixture
def control(nvml: StandInNvmlLibrary) -> Iterator[DeviceControl]:
    with DeviceControl(
        ("clocks", "power_limit"), nvml_spec=f"ctune.testing.standin_nvml:{nvml.path}"
    ) as c:
        yield c


def test_genes_are_in_the_space_but_never_compiled(spec: KernelSpec) -> None:
    clock, power = spec.space.gene("sm_clock_mhz"), spec.space.gene("power_limit_w")
    assert clock.family == power.family == "device"
    assert not clock.compiled and not power.compiled
    assert clock.default == power.default == AS_FOUND
    assert clock.values == LIMITS.clock_values() and power.values == LIMITS.power_values()
    assert "sm_clock_mhz" not in spec.runtime_names  # not a launch value either
    values = {**spec.default_candidate().as_dict(), "sm_clock_mhz": 1485}
    assert spec.space.build_group(values.items()) == spec.space.build_group(
        spec.default_candidate().genes
    )


def test_only_the_asked_for_kinds(tmp_path: Path) -> None:
    assert [g.name for g in device_genes(("power_limit",), LIMITS)] == ["power_limit_w"]


def test_a_spec_gene_of_the_same_name_is_refused(spec: KernelSpec) -> None:
    with pytest.raises(UserError, match="gene sm_clock_mhz is also a device gene"):
        with_device_genes(spec, device_genes(("clocks",), LIMITS))


def test_spec_files_cannot_declare_the_family(spec: KernelSpec) -> None:
    from ctune.spec.space.params import SPEC_FAMILIES

    assert "device" not in SPEC_FAMILIES
    Gene("x", (0, 1), 0, "device")  # but the space holds it


def test_binary_identity_includes_the_device_setting(spec: KernelSpec) -> None:
    compiler = StandInCompiler(spec, fail_every=None)
    problem = spec.problem()
    base = spec.default_candidate()
    clocked = spec.candidate({**base.as_dict(), "sm_clock_mhz": 1485})
    ids = []
    for cand in (base, clocked):
        build = compiler.submit(cand, problem).result()
        build = Build(
            build.candidate_key, build.argv, build.toolchain, build.outcome, sass_sha256="s" * 64
        )
        ids.append(binary_identity(spec, cand, build, problem))
    assert None not in ids and ids[0] != ids[1]


def test_setting_of_a_candidate(spec: KernelSpec) -> None:
    cand = spec.candidate({**spec.default_candidate().as_dict(), "power_limit_w": 450})
    assert setting_of(spec, cand) == DeviceSetting(None, 450)
    assert setting_of(spec, spec.default_candidate()).is_as_found


class _SeesTheDevice(StandInMeasurer):
    """Records what the stand-in device held while each candidate was measured."""

    def __init__(self, nvml: StandInNvmlLibrary) -> None:
        super().__init__(samples=20, fault_corner=None, wrong_every=None)
        self.nvml = nvml
        self.seen: list[tuple[list[int] | None, int]] = []

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        state = self.nvml.load()
        self.seen.append((state.locked_mhz, state.power_mw))
        return super().measure(spec, candidate, build, problem, plan)

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
        return {
            c.key(): [self.measure(spec, c, b, problem, plan) for _ in range(processes)]
            for c, b in items
        }


def _build(spec: KernelSpec, cand: Candidate) -> Build:
    return StandInCompiler(spec, fail_every=None).submit(cand, spec.problem()).result()


def test_measurer_applies_around_each_candidate_and_restores(
    spec: KernelSpec, nvml: StandInNvmlLibrary, control: DeviceControl
) -> None:
    inner = _SeesTheDevice(nvml)
    measurer = DeviceGeneMeasurer(inner, control)
    base = spec.default_candidate()
    tuned = spec.candidate({**base.as_dict(), "sm_clock_mhz": 1485, "power_limit_w": 450})
    plan = SamplingPlan()
    m_base = measurer.measure(spec, base, _build(spec, base), spec.problem(), plan)
    m_tuned = measurer.measure(spec, tuned, _build(spec, tuned), spec.problem(), plan)
    assert inner.seen == [(None, 650_000), ([1485, 1485], 450_000)]
    assert "device:" not in m_base.sampling_note
    assert "device: SM clock locked at 1485 MHz, power limit 450 W; SM clock 1485 MHz" in (
        m_tuned.sampling_note
    )
    state = nvml.load()
    assert state.locked_mhz is None and state.power_mw == 650_000
    assert measurer.capabilities == inner.capabilities  # forwarded


def test_remeasure_applies_per_setting(
    spec: KernelSpec, nvml: StandInNvmlLibrary, control: DeviceControl
) -> None:
    inner = _SeesTheDevice(nvml)
    measurer = DeviceGeneMeasurer(inner, control)
    base = spec.default_candidate()
    items = [
        (c, _build(spec, c))
        for c in (
            base,
            spec.candidate({**base.as_dict(), "sm_clock_mhz": 1485}),
            spec.candidate({**base.as_dict(), "power_limit_w": 325}),
        )
    ]
    out = measurer.remeasure(spec, items, spec.problem(), SamplingPlan(), 2)
    assert {k: len(v) for k, v in out.items()} == {c.key(): 2 for c, _ in items}
    assert (
        inner.seen == [(None, 650_000)] * 2 + [([1485, 1485], 650_000)] * 2 + [(None, 325_000)] * 2
    )
    assert all("device: power limit 325 W" in m.sampling_note for m in out[items[2][0].key()])


def test_close_restores_and_releases(spec: KernelSpec, nvml: StandInNvmlLibrary) -> None:
    control = DeviceControl(("clocks",), nvml_spec=f"ctune.testing.standin_nvml:{nvml.path}")
    control.__enter__()
    inner: Any = _SeesTheDevice(nvml)
    DeviceGeneMeasurer(inner, control).close()
    assert control.guardian_pid is None
