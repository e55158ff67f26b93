"""A member tuned with device genes: the artifact records the setting, export says how to
apply it, the artifact's identity covers it, and the gate refuses to compare without it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from registry_support import make_artifact

from ctune.ci.gate_run import RebuildingRemeasurer, refuse_device_members
from ctune.errors import EXIT_INCONCLUSIVE, GateInconclusive, RegistryError
from ctune.records import Candidate, canonical_json, sha256_hex
from ctune.registry import export, schema
from ctune.registry.schema import Artifact

DEVICE = {"sm_clock_mhz": 1410, "power_limit_w": 450}


def _tuned() -> Artifact:
    a = make_artifact()
    cand = Candidate.of("gemm", {**a.front[0].candidate.as_dict(), **DEVICE})
    member = dataclasses.replace(a.front[0], candidate=cand, key=cand.key(), device=dict(DEVICE))
    return dataclasses.replace(a, front=(member, a.front[1]), pinned=cand.key())


def test_the_setting_round_trips_and_is_part_of_the_digest() -> None:
    a = _tuned()
    back = schema.decode(schema.encode(a), "a")
    assert back.front[0].device == DEVICE and back.baseline.device == {}
    other = dataclasses.replace(a.front[0], device={"sm_clock_mhz": 1200, "power_limit_w": 450})
    assert dataclasses.replace(a, front=(other, a.front[1])).digest() != a.digest()
    assert '"device"' not in schema.encode(make_artifact()).decode()  # old bytes unchanged


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ({"sm_clock_mhz": -5}, "expected a positive whole number"),
        ({"sm_clock_mhz": 1410.5}, "expected a positive whole number"),
        ({"memory_clock_mhz": 2619}, "not a device gene"),
    ],
)
def test_a_bad_setting_is_refused_on_read(device: dict[str, object], message: str) -> None:
    data = json.loads(schema.encode(_tuned()))
    data["front"][0]["device"] = device
    body = {k: v for k, v in data.items() if k != "digest"}  # a valid digest over bad content
    body["digest"] = sha256_hex(canonical_json(body))
    with pytest.raises(RegistryError, match=message):
        schema.decode(canonical_json(body).encode(), "a")


def test_export_says_how_to_apply_it() -> None:
    a = _tuned()
    data = json.loads(export.render(a, None, "json"))
    assert data["device"]["nvidia_smi"] == (
        "nvidia-smi -i 0 --lock-gpu-clocks=1410,1410 --power-limit=450"
    )
    assert data["device"]["nvml"] == [
        "nvmlDeviceSetGpuLockedClocks(handle, 1410, 1410)",
        "nvmlDeviceSetPowerManagementLimit(handle, 450000)",
    ]
    assert data["device"]["sm_clock_mhz"] == 1410
    assert "--reset-gpu-clocks" in data["device"]["restore"]
    header = export.render(a, None, "header")
    assert "#define CTUNE_GEMM_DEVICE_SM_CLOCK_MHZ (1410)" in header
    assert "--lock-gpu-clocks=1410,1410 --power-limit=450" in header
    assert "1410" not in export.render(a, None, "flags")  # not a compiler flag
    assert "device" not in json.loads(export.render(a, "baseline", "json"))


def test_the_gate_refuses_rather_than_compare_at_another_setting(tmp_path: Path) -> None:
    a = _tuned()
    refuse_device_members(a, [a.baseline])  # nothing set: fine
    with pytest.raises(GateInconclusive) as err:
        RebuildingRemeasurer(object(), tmp_path)(a, list(a.front), 3)
    assert err.value.exit_code == EXIT_INCONCLUSIVE
    assert "SM clock locked at 1410 MHz, power limit 450 W" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_searched_member_records_its_device_genes(tmp_path: Path) -> None:
    from ctune.measure.device_genes import device_genes, with_device_genes
    from ctune.measure.device_settings import DeviceLimits
    from ctune.registry.assemble import front_member
    from ctune.search.result import MemberResult
    from ctune.testing.standins import standin_spec

    limits = DeviceLimits((1980, 1485, 990), 200.0, 700.0, 700.0)
    spec = with_device_genes(
        standin_spec(tmp_path / "k"), device_genes(("clocks", "power_limit"), limits)
    )
    values = {**spec.default_candidate().as_dict(), "sm_clock_mhz": 1485}
    cand = spec.candidate(values)
    result = MemberResult(cand, cand.key(), {}, (1.0,), None, False, None, None)
    m = front_member(spec, spec.problem(), result, keep_samples=False)
    assert m.device == {"sm_clock_mhz": 1485}  # the power limit was left as found
    assert "sm_clock_mhz" not in m.defines and "power_limit_w" not in m.defines
    assert "sm_clock_mhz" not in m.runtime
