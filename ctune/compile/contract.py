"""The compiler contract: what the search, problem sets and dispatch tables need.

Implementations: ``NvccCompiler`` (the real nvcc, ``compile/nvcc.py``), the engine's
``EngineCompiler`` (``scale/compiler.py``) and the stand-ins of ``ctune.testing``.
``ctune.testing.contract_compiler`` is the suite every implementation passes.
"""

from __future__ import annotations

import abc
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.records import Build, Candidate
    from ctune.spec import KernelSpec, Problem


class Compiler(abc.ABC):
    """Turns a candidate of one spec into a :class:`Build` for one problem.

    The contract: ``build`` never raises for a candidate's failure: a compile error, a
    resource limit or a crash of the compiler is a Build with that outcome (and the log's
    tail); it raises only for what is not the candidate's (a spec whose arguments are
    wrong, a ctune bug). The same candidate and problem asked again give the same build,
    marked ``cache_hit``. ``submit`` is ``build`` as a future; it is thread-safe, and builds
    of one build group (candidates that differ only in runtime genes) share one compile.

    Optional hooks have working defaults here; a caller calls them directly:

    - ``jobs``: compiles it runs at once (0: the caller decides).
    - ``lookup``: the build if it needs no compile (a cache hit), else None.
    - ``argv``: the compiler's command for a build without compiling; None: not known
      without compiling (the caller builds and reads ``Build.argv``).
    - ``fingerprint_fields``: the toolchain fields a compiler that is not the real
      toolchain gives instead of the probed ones (a stand-in); None: probe it.
    - ``source_inputs``: the sources its builds compiled, file by file, as an artifact
      records them; by default the spec's include closure as nvcc sees it.
    - ``close``: release workers and pools; harmless to call twice.
    """

    jobs: int = 0

    @abc.abstractmethod
    def build(self, candidate: Candidate, problem: Problem) -> Build: ...

    def submit(self, candidate: Candidate, problem: Problem) -> Future[Build]:
        """``build`` as a future. Default: build now, return the finished future."""
        done: Future[Build] = Future()
        done.set_result(self.build(candidate, problem))
        return done

    def lookup(self, candidate: Candidate, problem: Problem) -> Build | None:
        """The build if it is at hand without compiling (a cache hit), else None."""
        return None

    def argv(self, candidate: Candidate, problem: Problem, output: Path) -> list[str] | None:
        """The compile command writing ``output``, without compiling; None: not known."""
        return None

    def fingerprint_fields(self) -> dict[str, str] | None:
        """The toolchain fingerprint fields this compiler gives itself; None: probe it."""
        return None

    def source_inputs(self, spec: KernelSpec, settings: Settings) -> dict[str, Any]:
        """What an artifact records of the sources compiled: the include closure."""
        from ctune.compile.deps import source_closure
        from ctune.compile.select_toolchain import nvcc_for

        closure = source_closure(
            spec, nvcc_for(settings), arch=settings.arch, scratch=settings.cache_dir
        )
        return {"closure": closure}

    def close(self) -> None:
        """Release what the compiler holds; harmless to call twice."""
        return None  # nothing to do by default

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Compiler"]
