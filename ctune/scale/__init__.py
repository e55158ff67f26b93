"""Scale out on a distributed engine (Dask): a compile farm and one measuring worker per GPU.

``executor`` (``--executor``, ``CTUNE_EXECUTOR``, ``[tool.ctune] executor``) picks where
a search compiles and measures; ``gpus`` how many GPUs of this host measure. The
driver, journal, resume and report are the same for every executor: only the compiler
(``EngineCompiler``) and the measurer (``EngineMeasurer``) differ, and with several GPUs
the scheduler measures that many candidates at once (``search/scheduler.py``); the search's
composition root (``search/session.py``) chooses them from the settings. Why
Dask, and how to run it: docs/scale-out.md.

Importing this package imports neither Dask nor CuPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctune.config import Settings


def uses_engine(settings: Settings) -> bool:
    """Does this search compile and measure through the engine?"""
    from ctune.scale.engine import resolve_executor

    return resolve_executor(settings).uses_engine


__all__ = ["uses_engine"]
