"""Fingerprint fields: every one, changed alone, is named with its severity and verdict."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest
from registry_support import FINGERPRINT, make_artifact

from ctune import identity_probe
from ctune.ci.check import STALE, WARN, BinaryCheck, Current, check_artifact
from ctune.evidence import identity as fingerprint
from ctune.evidence.identity import BUILD, FIELDS, HARD, SOFT, diff, not_checked, not_checked_reason
from ctune.records import sha256_hex
from ctune.registry.layout import parse_key

KEY = parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3")

EXPECTED_HARD = {
    "protocol_version",
    "arch",
    "spec_entry",
    "spec_problem_sha256",
    "spec_args_sha256",
    "spec_reference_sha256",
    "spec_tolerance_sha256",
    "spec_metrics_sha256",
    "gpu_name",
    "sm",
    "sm_count",
    "memory_bytes",
    "ecc",
    "mig",
    "l2_policy",
    "compute_mode",
}
EXPECTED_BUILD = {
    "nvcc_version",
    "ptxas_version",
    "kernel_source_sha256",
    "cutlass_version",
    "spec_build_sha256",
}
EXPECTED_SOFT = {
    "host_compiler",
    "harness_sha256",
    "spec_space_sha256",
    "driver",
    "power_limit_w",
    "clocks",
    "ctune_version",
    "cuda_runtime",
    "cupy_version",
}


def verifier_standin(identical: bool) -> tuple[list[str], object]:
    """A stand-in for the nvcc rebuild: says identical or not, and records that it ran."""
    calls: list[str] = []

    def verify(artifact: object, spec: object) -> BinaryCheck:
        calls.append("rebuilt")
        return BinaryCheck(3, () if identical else ("member x: SASS aaa -> bbb",))

    return calls, verify


def test_table_follows_the_staleness_key() -> None:
    assert {n for n, (sev, _) in FIELDS.items() if sev == HARD} == EXPECTED_HARD
    assert {n for n, (sev, _) in FIELDS.items() if sev == BUILD} == EXPECTED_BUILD
    assert {n for n, (sev, _) in FIELDS.items() if sev == SOFT} == EXPECTED_SOFT
    assert {src for _, src in FIELDS.values()} == {"toolchain", "gpu", "source", "spec", "harness"}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_each_field_changed_alone(name: str) -> None:
    artifact = make_artifact()
    current = Current({**FINGERPRINT, name: FINGERPRINT[name] + "-changed"})
    calls, verify = verifier_standin(identical=True)
    result = check_artifact(KEY, artifact, current, verify)  # type: ignore[arg-type]
    assert [c.name for c in result.changes] == [name]
    change = result.changes[0]
    assert (change.old, change.new) == (FINGERPRINT[name], FINGERPRINT[name] + "-changed")
    if name in EXPECTED_HARD:
        assert change.severity == HARD and result.verdict() == STALE and not calls
    elif name in EXPECTED_BUILD:
        # a build input changed: decided by rebuilding, identical SASS keeps it valid
        assert change.severity == BUILD and calls == ["rebuilt"]
        assert result.verdict() == WARN and result.verdict(strict=True) == STALE
    else:
        assert change.severity == SOFT and result.verdict() == WARN and not calls
        assert result.verdict(strict=True) == STALE


@pytest.mark.parametrize("name", sorted(EXPECTED_BUILD))
def test_build_change_with_other_sass_or_unverified_is_stale(name: str) -> None:
    current = Current({**FINGERPRINT, name: "other"})
    _, differs = verifier_standin(identical=False)
    result = check_artifact(KEY, make_artifact(), current, differs)  # type: ignore[arg-type]
    assert result.verdict() == STALE and result.binaries is not None
    assert result.binaries.differences == ("member x: SASS aaa -> bbb",)
    assert check_artifact(KEY, make_artifact(), current).verdict() == STALE  # not verified


def test_hard_change_skips_the_rebuild() -> None:
    current = Current({**FINGERPRINT, "arch": "sm_100", "nvcc_version": "other"})
    calls, verify = verifier_standin(identical=True)
    result = check_artifact(KEY, make_artifact(), current, verify)  # type: ignore[arg-type]
    assert result.verdict() == STALE and not calls


def test_changed_sampling_settings_are_hard() -> None:
    plan = {"warmup_ms": 0.0, "rep_ms": 100.0, "energy_window_s": 1.0}
    result = check_artifact(KEY, make_artifact(), Current(dict(FINGERPRINT), plan=plan))
    assert [(c.name, c.old, c.new, c.severity) for c in result.changes] == [
        ("plan.warmup_ms", "25", "0", HARD)
    ]
    assert result.verdict() == STALE


def test_closure_changes_are_named_by_file() -> None:
    artifact = make_artifact()
    recorded = {"gemm.cu": "1" * 64, "@cutlass/cute/tensor.hpp": "2" * 64, "old.h": "3" * 64}
    artifact = __import__("dataclasses").replace(artifact, inputs={"closure": recorded})
    now = {"gemm.cu": "9" * 64, "@cutlass/cute/tensor.hpp": "2" * 64, "new.h": "4" * 64}
    current = Current({**FINGERPRINT, "kernel_source_sha256": "d" * 64}, closure=now)
    result = check_artifact(KEY, artifact, current)
    assert result.inputs_changed == ("gemm.cu (changed)", "new.h (added)", "old.h (removed)")


def test_nothing_changed_is_fresh_over_repeated_checks() -> None:
    artifact = make_artifact()
    for _ in range(5):
        result = check_artifact(KEY, artifact, Current(dict(FINGERPRINT)))
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
    result = check_artifact(KEY, make_artifact(), Current(no_gpu))
    assert result.changes == ()
    gpu_fields = sorted(k for k in FIELDS if FIELDS[k][1] == "gpu")
    assert list(result.not_checked) == gpu_fields
    line = not_checked_reason(list(result.not_checked), gpu_probed=False)
    assert line.startswith("no GPU (") and "driver" in line and "gpu_name" in line


def test_field_never_recorded_counts_as_changed() -> None:
    old = {k: v for k, v in FINGERPRINT.items() if k != "protocol_version"}
    changes = diff(old, FINGERPRINT, set(FINGERPRINT))
    assert [(c.name, c.old, c.severity) for c in changes] == [
        ("protocol_version", "(not recorded)", HARD)
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
    assert identity_probe.harness_fields()["ctune_version"] == __import__("ctune").__version__


def test_harness_digest_follows_the_code_not_its_comments(tmp_path: Path) -> None:
    package = tmp_path / "ctune"
    shutil.copytree(Path(fingerprint.__file__).parents[1] / "measure", package / "measure")
    (package / "evidence").mkdir()
    stats = Path(fingerprint.__file__).parent / "stats.py"
    shutil.copy(stats, package / "evidence" / "stats.py")
    before = fingerprint.harness_sha256(package)
    assert before == fingerprint.harness_sha256()  # the installed package, the same code
    plan = package / "measure" / "plan.py"
    text = plan.read_text()
    plan.write_text(text.replace('"""', '"""Reworded. ', 1) + "\n# a comment\n\n")
    assert fingerprint.harness_sha256(package) == before
    plan.write_text(text + "\nEXTRA = 1\n")
    assert fingerprint.harness_sha256(package) != before


def test_current_fingerprint_composes_and_keeps_only_known_fields(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text("def ref(a):\n    return {'y': a}\n")
    spec = types.SimpleNamespace(
        arch="sm_90",
        l2_policy="hot",
        raw={"l2_policy": "hot", "entry": "k", "problems": [{"name": "p", "dims": {"N": 4}}]},
        include_dirs=(),
        source_path=Path("k.cu"),
        reference_path=ref,
    )
    import ctune.compile.deps as deps

    monkeypatch.setattr(deps, "source_closure", lambda spec, nvcc="nvcc", **_: {"k.cu": "c" * 64})
    toolchain = {"nvcc_version": "V", "ptxas_version": "P", "host_compiler": "G"}
    gpu = {"gpu_name": "G", "sm": "sm_90", "unknown_field": "x"}
    got = identity_probe.current_fingerprint(
        spec, True, problem="p", toolchain=toolchain, gpu_fields=gpu
    )
    assert got["l2_policy"] == "hot" and got["cutlass_version"] == "none"
    assert got["kernel_source_sha256"] == deps.closure_sha256({"k.cu": "c" * 64})
    assert got["spec_entry"] == "k" and got["protocol_version"] == "1"
    assert "unknown_field" not in got and got["gpu_name"] == "G"
    no_gpu = identity_probe.current_fingerprint(
        spec, False, problem="p", toolchain=toolchain, gpu_fields=gpu
    )
    assert "gpu_name" not in no_gpu


def test_reference_digest_ignores_comments_not_code(tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text("def ref(a):\n    return {'y': a * 2}\n")
    before = fingerprint.reference_code_sha256(ref)
    ref.write_text("# the reference\ndef ref(a):  # doubled\n\n    return {'y': a * 2}\n")
    assert fingerprint.reference_code_sha256(ref) == before
    ref.write_text("def ref(a):\n    return {'y': a * 3}\n")
    assert fingerprint.reference_code_sha256(ref) != before
    ref.write_text("def ref(a):\n    return {'y': '#' + a}  # a '#' in a string is code\n")
    assert fingerprint.reference_code_sha256(ref) == sha256_hex(
        "def ref(a):\n    return {'y': '#' + a}"
    )
