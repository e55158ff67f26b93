"""Toolchains the compile tests need beyond the system nvcc: a ptxas that takes advanced
controls (13.3+), from ``CTUNE_TEST_PTXAS`` or an installed CUDA 13.3 wheel; and the real
controls files (CompileIQ outputs) to build with."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ctune.compile.find_toolchains import wheel_nvccs
from ctune.compile.toolchain import controls_release, version_in


def ptxas_version(ptxas: Path) -> str:
    """``ptxas --version``'s release ("" when it does not run)."""
    done = subprocess.run([ptxas, "--version"], capture_output=True, text=True, check=False)
    return (version_in(done.stdout) or "") if done.returncode == 0 else ""


def new_ptxas() -> tuple[Path | None, str]:
    """(a ptxas that takes advanced controls, "") or (None, why there is none)."""
    given = os.environ.get("CTUNE_TEST_PTXAS")
    found = [Path(given)] if given else [n.parent / "ptxas" for n in wheel_nvccs()]
    for ptxas in found:
        if ptxas.is_file() and controls_release(ptxas_version(ptxas)):
            return ptxas, ""
    if given:
        return None, f"CTUNE_TEST_PTXAS={given} is not a ptxas 13.3 or later"
    return None, "no ptxas 13.3: pip install 'ctune[cuda13.3]' or set CTUNE_TEST_PTXAS"


#: the controls files this repository's registry ships (a checkout's, not an installed wheel's)
SHIPPED_CONTROLS = Path(__file__).resolve().parents[2] / "registry" / "controls"


def real_controls_files() -> list[Path]:
    """Real controls files, CompileIQ outputs: ``CTUNE_TEST_ACF`` (a file, or a folder of
    ``.acf`` files), else those the registry ships. Empty where there are none."""
    given = os.environ.get("CTUNE_TEST_ACF")
    path = Path(given) if given else SHIPPED_CONTROLS
    if path.is_dir():
        return sorted(path.glob("*.acf"))
    return [path] if path.is_file() else []
