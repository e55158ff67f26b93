"""Which GPU: one identifier (gpu_id, the registry's device class and the bench result
files' suffix) and one display form (gpu_label, what journals record)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctune.evidence.identity import NO_GPU, gpu_id, gpu_label
from ctune.records import DeviceInfo

ROOT = Path(__file__).parents[3]


@pytest.mark.parametrize(
    ("sm", "name", "expected"),
    [
        ("sm_90", "NVIDIA H100 80GB HBM3", "sm90-nvidia-h100-80gb-hbm3"),
        ("sm_90", "NVIDIA H200", "sm90-nvidia-h200"),
        ("sm_89", "NVIDIA GeForce RTX 4090", "sm89-nvidia-geforce-rtx-4090"),
        ("sm_100", "NVIDIA B200 (MIG 1g.23gb)", "sm100-nvidia-b200-mig-1g-23gb"),
    ],
)
def test_gpu_id_is_the_same_from_a_measurement_and_from_a_fingerprint(
    sm: str, name: str, expected: str
) -> None:
    assert gpu_id({"sm": sm, "gpu_name": name}) == expected
    assert gpu_id(DeviceInfo(name=name, uuid="GPU-1", sm=sm, driver="580")) == expected
    # the display form: model and SM, not the UUID or driver (a driver update is the same GPU)
    other = DeviceInfo(name=name, uuid="GPU-2", sm=sm, driver="590")
    assert gpu_label(other) == gpu_label({"sm": sm, "gpu_name": name}) == f"{name} ({sm})"


def test_no_gpu_has_one_name() -> None:
    assert gpu_id(None) == gpu_id({}) == gpu_id({"sm": "sm_90"}) == NO_GPU == "compile-only"
    # a compile-only artifact keeps the arch in its device class (as it always did)
    assert gpu_id({"sm": "sm_90", "gpu_name": "compile-only"}) == "sm90-compile-only"


@pytest.mark.parametrize(
    "path", sorted((ROOT / "registry").rglob("*.json")), ids=lambda p: p.parent.name
)
def test_committed_artifacts_are_filed_under_their_gpu_id(path: Path) -> None:
    data = json.loads(path.read_text())
    assert path.stem == data["device_class"] == gpu_id(data["fingerprint"])


def test_bench_results_are_named_by_gpu_id() -> None:
    """Every committed per-GPU result file ends in the gpu_id of the GPU it records."""
    named = 0
    for path in sorted((ROOT / "bench" / "results").glob("*-sm*.json")):
        data = json.loads(path.read_text())
        fp = data.get("fingerprint") or {}
        model = fp.get("gpu_name") or fp.get("gpu") or data.get("gpu")
        sm = fp.get("sm") or data.get("sm") or "sm_90"  # saxpy_placement recorded no SM
        assert path.stem.endswith("-" + gpu_id({"gpu_name": model, "sm": sm})), path.name
        named += 1
    assert named >= 5
