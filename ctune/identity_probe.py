"""The current fingerprint: what this machine says now about a spec, for the identity
model's rules (:mod:`ctune.evidence.identity`: fields, severities, diff).

It probes what lies above the evidence layer: the toolchain's versions
(``ctune.compile.toolchain``), the measurement protocol's version
(``ctune.measure.protocol``), the source closure and CUTLASS (``ctune.compile.deps``); the
GPU's fields come from the identity's own probe. Nothing is probed at import, and the
probes are imported where they run (tests stand in for them there).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from ctune.evidence import identity

#: how long one ``--version`` probe may take
PROBE_TIMEOUT_S = 60


def _first_line(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
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
    # a split toolchain (cubins from another release's ptxas) says so in ptxas_version
    out = {"nvcc_version": tc.nvcc_version_line, "ptxas_version": tc.ptxas_label}
    cxx = shutil.which(host_cxx)
    line = _first_line([cxx, "--version"]) if cxx else None
    if line:
        out["host_compiler"] = line
    return out


def harness_fields() -> dict[str, str]:
    """The protocol version (hard), the measuring code's digest and ctune's version (soft)."""
    from ctune import __version__
    from ctune.measure.protocol import PROTOCOL_VERSION

    return {
        "protocol_version": str(PROTOCOL_VERSION),
        "harness_sha256": identity.harness_sha256(),
        "ctune_version": __version__,
    }


def spec_fields(
    spec: Any,
    problem: str | None = None,
    nvcc: str = "nvcc",
    *,
    l2_policy: str | None = None,
    arch: str | None = None,
) -> dict[str, str]:
    """:func:`spec_part_fields` plus the source closure, arch, L2 policy and CUTLASS."""
    from ctune.compile.deps import (
        closure_sha256,
        cutlass_version,
        source_closure,
        uses_cutlass,
    )

    on_cutlass = uses_cutlass(tuple(spec.include_dirs))
    return {
        "kernel_source_sha256": closure_sha256(source_closure(spec, nvcc, arch=arch or "")),
        "arch": arch or spec.arch,
        "l2_policy": l2_policy or spec.l2_policy,
        "cutlass_version": cutlass_version() if on_cutlass else "none",
        **identity.spec_part_fields(spec, problem),
    }


def current_fingerprint(
    spec: Any,
    gpu: bool,
    *,
    problem: str | None = None,
    nvcc: str = "nvcc",
    l2_policy: str | None = None,
    arch: str | None = None,
    toolchain: Mapping[str, str] | None = None,
    gpu_fields: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Everything this machine can say about ``spec`` (for ``problem``) now.

    ``gpu=False`` leaves the GPU fields out (they are then "not checked");
    ``toolchain``/``gpu_fields`` pass probes already made for other specs.
    The search writes exactly this (with ``gpu=True``) into the artifact and,
    without the GPU fields, into the journal's header.
    """
    out = dict(toolchain if toolchain is not None else probe_toolchain(nvcc))
    out.update(harness_fields())
    out.update(spec_fields(spec, problem, nvcc, l2_policy=l2_policy, arch=arch))
    if gpu:
        out.update((gpu_fields if gpu_fields is not None else identity.probe_gpu_machine()) or {})
    return {k: v for k, v in out.items() if k in identity.FIELDS}


__all__ = ["current_fingerprint", "harness_fields", "probe_toolchain", "spec_fields"]
