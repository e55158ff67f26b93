"""Probe the CUDA toolchain once: versions, paths and the options nvcc offers."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ctune.arch import check_offered
from ctune.errors import ToolchainError, UserError

if TYPE_CHECKING:
    from ctune.kernelspec import KernelSpec


@dataclass(frozen=True, slots=True)
class Toolchain:
    nvcc: str  # absolute path
    nvcc_version: str  # e.g. "13.0.88" (a string: 12.10 is not 12.1)
    ptxas_version: str
    nvcc_version_line: str  # the full "Cuda compilation tools, ..." line
    help_text: str

    def describe(self) -> str:
        return f"nvcc {self.nvcc_version} / ptxas {self.ptxas_version}"

    @property
    def bin_dir(self) -> Path:
        return Path(self.nvcc).parent


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"cannot run {argv[0]}: {exc}") from None
    if done.returncode != 0:
        raise ToolchainError(f"{' '.join(argv)} failed: {done.stderr.strip()[:200]}")
    return done.stdout


@lru_cache(maxsize=4)
def probe_toolchain(nvcc: str = "nvcc") -> Toolchain:
    """Find nvcc and ptxas and read their versions; no probing happens at import."""
    path = shutil.which(nvcc)
    if path is None:
        raise ToolchainError(
            f"nvcc not found ('{nvcc}' is not on PATH); install the CUDA toolkit or set CTUNE_NVCC"
        )
    # nvcc may be a wrapper script: ask it where its own bin dir is via ptxas next to it
    version_text = _run([path, "--version"])
    match = re.search(r"release [\d.]+, V([\d.]+)", version_text)
    if not match:
        raise ToolchainError(f"cannot read the nvcc version from: {version_text.strip()[:200]}")
    line = next(
        (ln.strip() for ln in version_text.splitlines() if "release" in ln), version_text.strip()
    )
    ptxas = shutil.which("ptxas") or str(Path(path).resolve().parent / "ptxas")
    ptxas_text = _run([ptxas, "--version"])
    ptxas_match = re.search(r"V([\d.]+)", ptxas_text)
    return Toolchain(
        nvcc=path,
        nvcc_version=match.group(1),
        ptxas_version=ptxas_match.group(1) if ptxas_match else "unknown",
        nvcc_version_line=line,
        help_text=_run([path, "--help"]),
    )


def target_arch(setting: str, spec: KernelSpec, toolchain: Toolchain) -> str:
    """The arch candidates are built for: the setting, else the spec's. One this nvcc does
    not compile for (``sm_12``, an old ``sm_70``) is refused before any build, naming where
    it came from, rather than failing every candidate with ``nvcc fatal``."""
    arch = setting or spec.arch
    try:
        return check_offered(arch, toolchain.help_text)
    except ValueError as exc:
        where = (
            "arch (--arch, CTUNE_ARCH or [tool.ctune])" if setting else f"{spec.yaml_path}: arch"
        )
        raise UserError(f"{where}: {exc}; use one it lists") from None
