"""Staleness: compare each artifact's fingerprint with this machine, now.

``ctune check`` (and the gate's first step) runs this. The toolchain and
the GPU are probed once per run; each kernel's spec and source closure once
per kernel. On a machine without a GPU the GPU fields are left out and
reported as "not checked: no GPU" instead of being assumed equal (DESIGN
10.8: CI checks what it can know there: sources, spec, toolchain, harness).
SASS re-checks (rebuild and compare each member's ``sass_sha256``) are not
done yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctune import fingerprint
from ctune.errors import EXIT_GATE_FAILED, EXIT_OK, CtuneError, ToolchainError, UserError
from ctune.records import FieldChange
from ctune.registry.layout import ArtifactKey
from ctune.registry.schema import Artifact
from ctune.registry.store import ArtifactStore, Quarantined

FRESH, WARN, STALE = "fresh", "warn", "stale"


@dataclass(frozen=True, slots=True)
class CheckResult:
    key: ArtifactKey
    changes: tuple[FieldChange, ...]
    not_checked: tuple[str, ...]
    error: str = ""  # the kernel spec could not be loaded: nothing to compare with

    def verdict(self, strict: bool = False) -> str:
        hard = self.error or any(c.severity == fingerprint.HARD for c in self.changes)
        if hard or (strict and self.changes):
            return STALE
        return WARN if self.changes else FRESH


@dataclass(frozen=True, slots=True)
class CheckReport:
    results: tuple[CheckResult, ...]
    quarantined: tuple[Quarantined, ...]
    gpu_probed: bool

    def exit_code(self, strict: bool = False) -> int:
        """1 when any artifact is stale (soft changes too under ``strict``), else 0.

        Unreadable artifacts are reported by the CLI as a registry error.
        """
        stale = any(r.verdict(strict) == STALE for r in self.results)
        return EXIT_GATE_FAILED if stale else EXIT_OK


def check_artifact(key: ArtifactKey, artifact: Artifact, current: Mapping[str, str]) -> CheckResult:
    """Pure: which recorded fields differ from ``current``, and which were not checkable."""
    checked = set(current)
    return CheckResult(
        key,
        tuple(fingerprint.diff(artifact.fingerprint, current, checked)),
        tuple(fingerprint.not_checked(artifact.fingerprint, current, checked)),
    )


def load_kernel_spec(kernels_dir: Path, kernel: str, nvcc: str = "nvcc") -> Any:
    """``<kernels_dir>/<kernel>.yaml`` loaded with this nvcc's options."""
    from ctune.compile.toolchain import probe_toolchain
    from ctune.kernelspec import load_spec

    path = Path(kernels_dir) / f"{kernel}.yaml"
    if not path.is_file():
        raise UserError(f"kernel spec {path} not found (use --kernels DIR)")
    return load_spec(path, probe_toolchain(nvcc).help_text)


class FingerprintProbe:
    """This machine's fingerprint per kernel, probing shared parts once."""

    def __init__(
        self,
        kernels_dir: Path,
        *,
        gpu: bool,
        nvcc: str = "nvcc",
        arch: str | None = None,
        l2_policy: str | None = None,
    ) -> None:
        self.kernels_dir = Path(kernels_dir)
        self.nvcc = nvcc
        self.arch = arch
        self.l2_policy = l2_policy
        self.toolchain = fingerprint.probe_toolchain(nvcc)
        self.gpu_fields = fingerprint.probe_gpu_machine() if gpu else None
        self._cache: dict[str, dict[str, str]] = {}

    @property
    def gpu_probed(self) -> bool:
        return self.gpu_fields is not None

    def for_kernel(self, kernel: str) -> dict[str, str]:
        if kernel not in self._cache:
            spec = load_kernel_spec(self.kernels_dir, kernel, self.nvcc)
            self._cache[kernel] = fingerprint.current_fingerprint(
                spec,
                self.gpu_fields is not None,
                nvcc=self.nvcc,
                l2_policy=self.l2_policy,
                arch=self.arch,
                toolchain=self.toolchain,
                gpu_fields=self.gpu_fields,
            )
        return self._cache[kernel]


def check_all(
    artifacts: Iterable[tuple[ArtifactKey, Artifact]], probe: FingerprintProbe
) -> list[CheckResult]:
    results = []
    for key, artifact in artifacts:
        try:
            current = probe.for_kernel(artifact.kernel)
        except ToolchainError:
            raise  # no nvcc: the whole check is meaningless, say so (exit 3)
        except CtuneError as exc:
            results.append(CheckResult(key, (), (), error=str(exc)))
            continue
        results.append(check_artifact(key, artifact, current))
    return results


def check_registry(
    root: Path, probe: FingerprintProbe, *, pinned_only: bool = False
) -> CheckReport:
    """Check every artifact (or only pinned ones) under ``root``."""
    listing = ArtifactStore(root).list()
    chosen = [(k, a) for k, a in listing.artifacts if a.pinned is not None or not pinned_only]
    return CheckReport(tuple(check_all(chosen, probe)), listing.quarantined, probe.gpu_probed)
