"""Compile candidates with the real nvcc: argv (pure), runner, cache, resources, SASS."""

from ctune.compile.command import build_argv
from ctune.compile.nvcc import NvccCompiler
from ctune.compile.toolchain import Toolchain, probe_toolchain

__all__ = ["NvccCompiler", "Toolchain", "build_argv", "probe_toolchain"]
