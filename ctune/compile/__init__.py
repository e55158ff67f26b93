"""Compile candidates with the real nvcc: argv (pure), runner, cache, resources, SASS.

The names below are imported on first use: the spec loader needs ``compile.flags``,
``compile.entry`` and ``compile.deps`` while ``compile.nvcc`` needs the spec, and an
eager import here would make that an import cycle.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "NvccCompiler": "ctune.compile.nvcc",
    "Toolchain": "ctune.compile.toolchain",
    "build_argv": "ctune.compile.command",
    "probe_toolchain": "ctune.compile.toolchain",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ctune.compile' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


__all__ = ["NvccCompiler", "Toolchain", "build_argv", "probe_toolchain"]
