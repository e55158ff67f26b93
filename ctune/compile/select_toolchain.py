"""Which toolchain the settings select: the one nvcc every build, include scan and
fingerprint runs.

``nvcc`` is a name on PATH, a path, or ``wheel`` (the ``nvidia-cuda-nvcc`` wheel's, found by
compile/find_toolchains.py); a ``ptxas`` setting makes it a split toolchain
(compile/split_toolchain.py): PTX from that nvcc, cubins from the given ptxas.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctune.compile.find_toolchains import wheel_nvccs
from ctune.compile.split_toolchain import split_toolchain
from ctune.errors import ToolchainError

if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings

#: the ``nvcc`` setting that selects the nvidia-cuda-nvcc wheel's toolchain
WHEEL = "wheel"


def resolve_nvcc(nvcc: str) -> str:
    """The ``nvcc`` setting as the nvcc to run: ``wheel`` is the nvidia-cuda-nvcc wheel's
    (the running interpreter's first); anything else as it is."""
    if nvcc != WHEEL:
        return nvcc
    found = wheel_nvccs()
    if not found:
        raise ToolchainError(
            "nvcc=wheel: no nvidia-cuda-nvcc wheel is installed for this Python; "
            "pip install 'ctune[cuda13.3]', or give --nvcc a path"
        )
    return str(found[0])


def nvcc_for(settings: Settings) -> str:
    """The nvcc every build, include scan and fingerprint runs with these settings: the
    chosen one, or, with a ``ptxas`` setting, that nvcc's copy in a private folder under
    the cache whose ptxas is the given one (compile/split_toolchain.py)."""
    nvcc = resolve_nvcc(settings.nvcc)
    if not settings.ptxas:
        return nvcc
    root = Path(settings.cache_dir).resolve() / "toolchains"
    return str(split_toolchain(nvcc, Path(settings.ptxas), root))


def toolchain_for(settings: Settings) -> Toolchain:
    """The probed toolchain these settings select."""
    from ctune.compile.toolchain import probe_toolchain  # looked up at the call: tests stand in

    return probe_toolchain(nvcc_for(settings))
