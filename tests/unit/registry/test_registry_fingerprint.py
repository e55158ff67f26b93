"""Fingerprint fields: every one, changed alone, is named with its severity."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from registry_support import FINGERPRINT, make_artifact

from ctune import fingerprint
from ctune.fingerprint import FIELDS, HARD, SOFT, diff, not_checked, not_checked_reason
from ctune.registry.check import STALE, WARN, check_artifact
from ctune.registry.layout import parse_key

KEY = parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3")

EXPECTED_HARD = {
    "nvcc_version",
    "ptxas_version",
    "arch",
    "kernel_source_sha256",
    "spec_sha256",
    "harness_sha256",
    "gpu_name",
    "sm",
    "sm_count",
    "memory_bytes",
    "ecc",
    "mig",
    "l2_policy",
    "cutlass_version",
    "compute_mode",
}
EXPECTED_SOFT = {
    "host_compiler",
    "driver",
    "power_limit_w",
    "clocks",
    "ctune_version",
    "cuda_runtime",
    "cupy_version",
}


def test_table_follows_the_staleness_key() -> None:
    assert {n for n, (sev, _) in FIELDS.items() if sev == HARD} == EXPECTED_HARD
    assert {n for n, (sev, _) in FIELDS.items() if sev == SOFT} == EXPECTED_SOFT
    assert {src for _, src in FIELDS.values()} == {"toolchain", "gpu", "source", "spec", "harness"}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_each_field_changed_alone(name: str) -> None:
    artifact = make_artifact()
    current = {**FINGERPRINT, name: FINGERPRINT[name] + "-changed"}
    result = check_artifact(KEY, artifact, current)
    assert [c.name for c in result.changes] == [name]
    change = result.changes[0]
    assert (change.old, change.new) == (FINGERPRINT[name], FINGERPRINT[name] + "-changed")
    if name in EXPECTED_HARD:
        assert change.severity == HARD and result.verdict() == STALE
    else:
        assert change.severity == SOFT and result.verdict() == WARN
        assert result.verdict(strict=True) == STALE


def test_nothing_changed_is_fresh_over_repeated_checks() -> None:
    artifact = make_artifact()
    for _ in range(5):
        result = check_artifact(KEY, artifact, dict(FINGERPRINT))
        assert result.changes == () and result.verdict(strict=True) == "fresh"


@pytest.mark.parametrize(
    ("old", "new"),
    [("12.10", "12.1"), ("12.1", "12.10"), ("13.0", "13"), ("580.95.05", "580.95.5")],
)
def test_version_strings_compare_as_strings(old: str, new: str) -> None:
    changes = diff({"cuda_runtime": old}, {"cuda_runtime": new}, {"cuda_runtime"})
    assert [(c.old, c.new) for c in changes] == [(old, new)]


def test_fields_not_probed_are_not_checked_not_equal() -> None:
    no_gpu = {k: v for k, v in FINGERPRINT.items() if FIELDS[k][1] != "gpu"}
    result = check_artifact(KEY, make_artifact(), no_gpu)
    assert result.changes == ()
    gpu_fields = sorted(k for k in FIELDS if FIELDS[k][1] == "gpu")
    assert list(result.not_checked) == gpu_fields
    line = not_checked_reason(list(result.not_checked), gpu_probed=False)
    assert line.startswith("no GPU (") and "driver" in line and "gpu_name" in line


def test_field_never_recorded_counts_as_changed() -> None:
    old = {k: v for k, v in FINGERPRINT.items() if k != "harness_sha256"}
    changes = diff(old, FINGERPRINT, set(FINGERPRINT))
    assert [(c.name, c.old, c.severity) for c in changes] == [
        ("harness_sha256", "(not recorded)", HARD)
    ]
    assert not_checked(old, {}, set()) == sorted(old)


def test_hard_changes_sort_first() -> None:
    new = {**FINGERPRINT, "driver": "x", "sm": "sm_100"}
    assert [c.name for c in diff(FINGERPRINT, new, set(new))] == ["sm", "driver"]


# --- GPU probe through a stand-in NVML module ------------------------------------


class _NVMLError(Exception):
    pass


def _fake_pynvml(
    *, devices: int = 1, init_fails: bool = False, mig: bool = True
) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = _NVMLError
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM = 1, 2
    calls: list[str] = []
    m.calls = calls

    def init() -> None:
        calls.append("init")
        if init_fails:
            raise _NVMLError("driver not loaded")

    def not_supported(*_: object) -> None:
        raise _NVMLError("not supported")

    m.nvmlInit = init
    m.nvmlShutdown = lambda: calls.append("shutdown")
    m.nvmlDeviceGetCount = lambda: devices
    m.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
    m.nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0)
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    m.nvmlSystemGetDriverVersion = lambda: "580.159.04"
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=85520809984)
    m.nvmlDeviceGetAttributes = lambda h: types.SimpleNamespace(multiprocessorCount=132)
    m.nvmlDeviceGetEccMode = lambda h: (1, 1)
    m.nvmlDeviceGetMigMode = (lambda h: (0, 0)) if mig else not_supported
    m.nvmlDeviceGetComputeMode = lambda h: 0
    m.nvmlDeviceGetPowerManagementLimit = lambda h: 700000
    m.nvmlDeviceGetApplicationsClock = not_supported
    return m


def test_probe_gpu_reads_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_pynvml(mig=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    got = fingerprint.probe_gpu()
    assert got == {
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "sm": "sm_90",
        "driver": "580.159.04",
        "memory_bytes": "85520809984",
        "sm_count": "132",
        "ecc": "on",
        "mig": "n/a",
        "compute_mode": "default",
        "power_limit_w": "700",
    }
    assert all(isinstance(v, str) for v in got.values())
    assert fake.calls == ["init", "shutdown"]


@pytest.mark.parametrize("kind", ["no-module", "init-fails", "no-devices"])
def test_probe_gpu_none_without_gpu(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    if kind == "no-module":
        monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    else:
        fake = _fake_pynvml(devices=0, init_fails=kind == "init-fails")
        monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert fingerprint.probe_gpu() is None


def test_harness_digest_is_stable_hex() -> None:
    a, b = fingerprint.harness_sha256(), fingerprint.harness_sha256()
    assert a == b and len(a) == 64
    assert fingerprint.harness_fields()["ctune_version"] == __import__("ctune").__version__


def test_current_fingerprint_composes_and_keeps_only_known_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = types.SimpleNamespace(
        spec_sha256="s" * 64,
        arch="sm_90",
        raw={"l2": "hot"},
        include_dirs=(),
        source_path=Path("k.cu"),
    )
    import ctune.compile.deps as deps

    monkeypatch.setattr(deps, "source_closure_sha256", lambda spec, nvcc="nvcc": "c" * 64)
    toolchain = {"nvcc_version": "V", "ptxas_version": "P", "host_compiler": "G"}
    gpu = {"gpu_name": "G", "sm": "sm_90", "unknown_field": "x"}
    got = fingerprint.current_fingerprint(spec, True, toolchain=toolchain, gpu_fields=gpu)
    assert got["l2_policy"] == "hot" and got["cutlass_version"] == "none"
    assert got["kernel_source_sha256"] == "c" * 64 and got["spec_sha256"] == "s" * 64
    assert "unknown_field" not in got and got["gpu_name"] == "G"
    no_gpu = fingerprint.current_fingerprint(spec, False, toolchain=toolchain, gpu_fields=gpu)
    assert "gpu_name" not in no_gpu
