"""Where CUDA toolchains are on this machine: PATH, CUDA_HOME/CUDA_PATH, /usr/local/cuda*,
and the ``nvidia-cuda-nvcc`` wheel (found through its installed metadata: nothing of it is
imported)."""

from __future__ import annotations

import glob
import importlib.metadata
import os
import shutil
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

#: the distribution that installs nvcc as a wheel, and where its nvcc lies in it
WHEEL_DISTRIBUTION = "nvidia-cuda-nvcc"
WHEEL_NVCC_PATHS = ("nvidia/cu13/bin/nvcc",)
#: environment variables that name a CUDA installation's root
CUDA_ROOT_VARIABLES = ("CUDA_HOME", "CUDA_PATH")
SYSTEM_ROOTS = "/usr/local/cuda*"


def _own_site_packages() -> list[Path]:
    """The running interpreter's own library folders (a venv's, not PYTHONPATH's)."""
    names = {sysconfig.get_path(kind) for kind in ("purelib", "platlib")}
    return [Path(name).resolve() for name in sorted(n for n in names if n)]


def wheel_nvccs(path: Sequence[str] | None = None, own: Sequence[Path] | None = None) -> list[Path]:
    """The nvcc of each installed nvidia-cuda-nvcc wheel on ``path`` (default
    ``sys.path``), those in the running interpreter's own site-packages (``own``) first."""
    own = _own_site_packages() if own is None else [Path(p).resolve() for p in own]
    found: list[Path] = []
    for dist in importlib.metadata.distributions(
        name=WHEEL_DISTRIBUTION, path=list(sys.path if path is None else path)
    ):
        for relative in WHEEL_NVCC_PATHS:
            nvcc = Path(str(dist.locate_file(relative)))
            if nvcc.is_file() and nvcc not in found:
                found.append(nvcc)

    def foreign(nvcc: Path) -> bool:
        return not any(nvcc.resolve().is_relative_to(folder) for folder in own)

    return sorted(found, key=foreign)  # stable: sys.path order within each group


def toolchain_places(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(where it was found, nvcc path) for every nvcc this machine has in the usual places,
    in that order; one nvcc may be found in several."""
    places: list[tuple[str, str]] = []
    on_path = shutil.which("nvcc", path=environ.get("PATH", os.defpath))
    if on_path:
        places.append(("PATH", on_path))
    for variable in CUDA_ROOT_VARIABLES:
        root = environ.get(variable, "")
        if root and (Path(root) / "bin" / "nvcc").is_file():
            places.append((variable, str(Path(root) / "bin" / "nvcc")))
    for root in sorted(glob.glob(SYSTEM_ROOTS)):
        if (Path(root) / "bin" / "nvcc").is_file():
            places.append((root, str(Path(root) / "bin" / "nvcc")))
    places.extend(("nvidia-cuda-nvcc wheel", str(nvcc)) for nvcc in wheel_nvccs())
    return places
