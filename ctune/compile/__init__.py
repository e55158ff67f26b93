"""Compile candidates with the real nvcc: argv (pure), runner, cache, resources, SASS.

The names below are imported on first use, so that importing one module of compile/ (the
argv, the toolchain probe) does not load the compiler and everything it needs.
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
