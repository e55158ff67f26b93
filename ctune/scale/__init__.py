"""Scale out on a distributed engine (Dask): a compile farm and one measuring worker per GPU.

``executor`` (``--executor``, ``CTUNE_EXECUTOR``, ``[tool.ctune] executor``) picks where
a search compiles and measures; ``gpus`` how many GPUs of this host measure. The
driver, journal, resume and report are the same for every executor: only the compiler
(``EngineCompiler``) and the measurer (``EngineMeasurer``) differ, and with several GPUs
the scheduler measures that many candidates at once (``search/scheduler.py``). Why
Dask, and how to run it: docs/scale-out.md.

Importing this package imports neither Dask nor CuPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings
    from ctune.spec import KernelSpec


def uses_engine(settings: Settings) -> bool:
    """Does this search compile and measure through the engine?"""
    from ctune.scale.engine import resolve_executor

    return resolve_executor(settings).uses_engine


def compiler_for(spec: KernelSpec, toolchain: Toolchain, settings: Settings) -> Any:
    """NvccCompiler for a local run, else an EngineCompiler (one line, exit 3, without Dask)."""
    if uses_engine(settings):
        from ctune.scale.engine import require_distributed

        require_distributed()
        from ctune.scale.compiler import EngineCompiler

        return EngineCompiler(spec, toolchain, settings)
    from ctune.compile.nvcc import NvccCompiler

    return NvccCompiler.from_settings(spec, toolchain, settings)


def measurer_for(settings: Settings) -> Any:
    """None for a local run on GPU 0 (the driver makes it, after its checks), a
    WorkerMeasurer for one other GPU, else an EngineMeasurer on the engine's GPU workers."""
    if uses_engine(settings):
        from ctune.scale.engine import require_distributed

        require_distributed()
        from ctune.scale.measurer import EngineMeasurer

        return EngineMeasurer(settings)
    from ctune.scale.engine import resolve_gpus

    (device,) = resolve_gpus(settings.gpus)
    if device == 0:
        return None
    from ctune.measure.session import WorkerMeasurer

    return WorkerMeasurer(device=device, settings=settings)


__all__ = ["compiler_for", "measurer_for", "uses_engine"]
