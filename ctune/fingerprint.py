"""Say what a result depends on, and which of those things changed.

A fingerprint is a flat ``{field: value}`` mapping of strings (versions are
strings: ``12.10`` is not ``12.1``, RELIABILITY S4). :data:`FIELDS` classes
every field as *hard* (a change makes an artifact STALE) or *soft* (a
warning; ``--strict`` fails on it), following the staleness key in
RELIABILITY.md and DESIGN 10.8, and names where its value comes from:

- ``toolchain``: nvcc/ptxas/host compiler, probed with ``--version``;
- ``gpu``: NVML and CuPy on the GPU machine (absent elsewhere: "not checked");
- ``source``: the kernel file and its include closure (CUTLASS included);
- ``spec``: the kernel spec and the benchmark settings (arch, L2 policy);
- ``harness``: ctune's version and the digest of its measurement code
  (Triton's ``triton_key()`` reasoning: a changed timer changes the numbers).

Nothing is probed at import; NVML, CuPy and the compile helpers are imported
inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctune.records import FieldChange

HARD = "hard"
SOFT = "soft"

#: field -> (severity, source)
FIELDS: dict[str, tuple[str, str]] = {
    "nvcc_version": (HARD, "toolchain"),
    "ptxas_version": (HARD, "toolchain"),
    # soft: device code comes from cicc/ptxas (versions above, and each member's SASS
    # digest); the host compiler only preprocesses it, and the CI machine's g++ is
    # rarely the GPU runner's, so a hard field would call every artifact stale there
    "host_compiler": (SOFT, "toolchain"),
    "arch": (HARD, "spec"),
    "kernel_source_sha256": (HARD, "source"),
    "spec_sha256": (HARD, "spec"),
    "l2_policy": (HARD, "spec"),
    "cutlass_version": (HARD, "source"),
    "harness_sha256": (HARD, "harness"),
    "gpu_name": (HARD, "gpu"),
    "sm": (HARD, "gpu"),
    "sm_count": (HARD, "gpu"),
    "memory_bytes": (HARD, "gpu"),
    "ecc": (HARD, "gpu"),
    "mig": (HARD, "gpu"),
    "compute_mode": (HARD, "gpu"),
    "driver": (SOFT, "gpu"),
    "power_limit_w": (SOFT, "gpu"),
    "clocks": (SOFT, "gpu"),
    "cuda_runtime": (SOFT, "gpu"),
    "cupy_version": (SOFT, "gpu"),
    "ctune_version": (SOFT, "harness"),
}

_COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
_PROBE_TIMEOUT_S = 60


def severity(name: str) -> str:
    """Hard or soft; a field this ctune does not know is hard (cannot vouch for it)."""
    return FIELDS.get(name, (HARD, ""))[0]


def _first_line(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in done.stdout.splitlines() if ln.strip()]
    return lines[0] if done.returncode == 0 and lines else None


def probe_toolchain(nvcc: str = "nvcc", host_cxx: str = "g++") -> dict[str, str]:
    """nvcc, ptxas and host-compiler version strings.

    Raises ToolchainError when nvcc is missing: a staleness check without
    the toolchain would pass while checking almost nothing.
    """
    from ctune.compile.toolchain import probe_toolchain as probe_nvcc

    tc = probe_nvcc(nvcc)
    out = {"nvcc_version": tc.nvcc_version_line, "ptxas_version": tc.ptxas_version}
    cxx = shutil.which(host_cxx)
    line = _first_line([cxx, "--version"]) if cxx else None
    if line:
        out["host_compiler"] = line
    return out


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _clocks(pynvml: Any, handle: Any) -> str:
    sm = pynvml.nvmlDeviceGetApplicationsClock(handle, pynvml.NVML_CLOCK_SM)
    mem = pynvml.nvmlDeviceGetApplicationsClock(handle, pynvml.NVML_CLOCK_MEM)
    return f"sm={sm}MHz mem={mem}MHz"


def probe_gpu(index: int = 0) -> dict[str, str] | None:
    """GPU fields of device ``index`` from NVML (nvidia-ml-py); None without a GPU.

    Fields a device does not support are left out (reported "not checked")
    rather than guessed.
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        if pynvml.nvmlDeviceGetCount() <= index:
            return None
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
        out = {
            "gpu_name": _text(pynvml.nvmlDeviceGetName(h)),
            "sm": f"sm_{major}{minor}",
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "memory_bytes": str(pynvml.nvmlDeviceGetMemoryInfo(h).total),
        }
        optional = {
            "sm_count": lambda: str(pynvml.nvmlDeviceGetAttributes(h).multiprocessorCount),
            "ecc": lambda: "on" if pynvml.nvmlDeviceGetEccMode(h)[0] else "off",
            "mig": lambda: "on" if pynvml.nvmlDeviceGetMigMode(h)[0] else "off",
            "compute_mode": lambda: _COMPUTE_MODES.get(
                pynvml.nvmlDeviceGetComputeMode(h), "unknown"
            ),
            "power_limit_w": lambda: f"{pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000:g}",
            "clocks": lambda: _clocks(pynvml, h),
        }
        for name, read in optional.items():
            try:
                out[name] = read()
            except pynvml.NVMLError:
                # MIG/ECC "not supported" is a property of the device: record it
                if name in ("ecc", "mig"):
                    out[name] = "n/a"
        return out
    except pynvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def probe_runtime(index: int = 0) -> dict[str, str]:
    """CuPy and CUDA runtime versions (and the SM count) of device ``index``; {} without CuPy."""
    try:
        import cupy
    except ImportError:
        return {}
    out = {"cupy_version": str(cupy.__version__)}
    try:
        v = int(cupy.cuda.runtime.runtimeGetVersion())
        out["cuda_runtime"] = f"{v // 1000}.{(v % 1000) // 10}"
        # NVML's device attributes (SM count) are MIG-only on H100/H200 (seen on an H200)
        props = cupy.cuda.runtime.getDeviceProperties(index)
        out["sm_count"] = str(int(props["multiProcessorCount"]))
    except Exception:  # CUDA runtime errors are cupy's own types; any failure: not checked
        pass
    return out


def probe_gpu_machine() -> dict[str, str] | None:
    """:func:`probe_gpu` plus :func:`probe_runtime`; None without a GPU."""
    fields = probe_gpu()
    return None if fields is None else {**probe_runtime(), **fields}  # NVML wins where both


def harness_sha256() -> str:
    """Digest of ``ctune/measure/*.py`` as installed: the code that makes the numbers."""
    folder = Path(__file__).parent / "measure"
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def harness_fields() -> dict[str, str]:
    from ctune import __version__

    return {"harness_sha256": harness_sha256(), "ctune_version": __version__}


def spec_fields(
    spec: Any, nvcc: str = "nvcc", *, l2_policy: str | None = None, arch: str | None = None
) -> dict[str, str]:
    """Fields of one kernel spec: its digest, source closure, arch, L2 policy, CUTLASS."""
    from ctune.compile.deps import cutlass_include_dir, cutlass_version, source_closure_sha256

    raw = getattr(spec, "raw", None) or {}
    uses_cutlass = cutlass_include_dir() in tuple(getattr(spec, "include_dirs", ()))
    return {
        "kernel_source_sha256": source_closure_sha256(spec, nvcc),
        "spec_sha256": spec.spec_sha256,
        "arch": arch or spec.arch,
        "l2_policy": l2_policy or str(raw.get("l2", "cold")),
        "cutlass_version": cutlass_version() if uses_cutlass else "none",
    }


def current_fingerprint(
    spec: Any,
    gpu: bool,
    *,
    nvcc: str = "nvcc",
    l2_policy: str | None = None,
    arch: str | None = None,
    toolchain: Mapping[str, str] | None = None,
    gpu_fields: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Everything this machine can say about ``spec`` now.

    ``gpu=False`` leaves the GPU fields out (they are then "not checked");
    ``toolchain``/``gpu_fields`` pass probes already made for other specs.
    The search writes exactly this (with ``gpu=True``) into the artifact.
    """
    out = dict(toolchain if toolchain is not None else probe_toolchain(nvcc))
    out.update(harness_fields())
    out.update(spec_fields(spec, nvcc, l2_policy=l2_policy, arch=arch))
    if gpu:
        out.update((gpu_fields if gpu_fields is not None else probe_gpu_machine()) or {})
    return {k: v for k, v in out.items() if k in FIELDS}


def diff(old: Mapping[str, str], new: Mapping[str, str], checked: set[str]) -> list[FieldChange]:
    """Fields in ``checked`` whose value in ``new`` differs from ``old``, hard first.

    A field ``old`` never recorded counts as changed (its severity stands):
    the artifact cannot vouch for it. Fields missing from ``new`` are not
    compared here; :func:`not_checked` lists them.
    """
    changes = []
    for name in sorted(checked):
        if name not in new:
            continue
        was = old.get(name)
        if was != new[name]:
            changes.append(
                FieldChange(
                    name, "(not recorded)" if was is None else was, new[name], severity(name)
                )
            )
    return sorted(changes, key=lambda c: (c.severity != HARD, c.name))


def not_checked(old: Mapping[str, str], new: Mapping[str, str], checked: set[str]) -> list[str]:
    """Known fields the artifact records that this check could not compare."""
    return sorted(n for n in old if n in FIELDS and not (n in checked and n in new))


def not_checked_reason(names: list[str], gpu_probed: bool) -> str:
    """One phrase for the CLI: ``not checked: no GPU (driver, gpu_name, ...)``."""
    gpu = [n for n in names if FIELDS[n][1] == "gpu"]
    other = [n for n in names if FIELDS[n][1] != "gpu"]
    parts = []
    if gpu:
        why = "not reported by this GPU" if gpu_probed else "no GPU"
        parts.append(f"{why} ({', '.join(gpu)})")
    if other:
        parts.append(f"not probed ({', '.join(other)})")
    return "; ".join(parts)


__all__ = [
    "FIELDS",
    "HARD",
    "SOFT",
    "current_fingerprint",
    "diff",
    "harness_fields",
    "harness_sha256",
    "not_checked",
    "not_checked_reason",
    "probe_gpu",
    "probe_gpu_machine",
    "probe_runtime",
    "probe_toolchain",
    "severity",
    "spec_fields",
]
