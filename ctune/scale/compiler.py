"""EngineCompiler: each compile is a task on the engine's compile workers.

It is a :class:`~ctune.compile.contract.Compiler` (``build``, ``submit``, ``jobs``,
``lookup``). A build
already in the local content-addressed cache is answered here, without a task (fillers,
confirmation and resumed runs ask for builds that exist). Otherwise a worker runs the
same NvccCompiler as a local run: on this host it writes into the shared cache by
path; on another host into its own, and the entry's files come back and are written
into the local cache under the same build key. A compile whose worker dies is run
once more on another worker; a second death is recorded as the candidate's
COMPILER_CRASH, and the search goes on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.compile.contract import Compiler
from ctune.compile.nvcc import LOG_TAIL_CHARS, NvccCompiler
from ctune.records import Build, Outcome, build_from_json, to_json
from ctune.scale import engine as engine_mod
from ctune.scale.futures import EngineFuture, killed_worker
from ctune.scale.tasks import CompileRecipe, compile_task

if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings
    from ctune.records import Candidate
    from ctune.spec import KernelSpec, Problem


class EngineCompiler(Compiler):
    """Compiles candidates of one spec on the engine; thread-safe like NvccCompiler."""

    def __init__(
        self, spec: KernelSpec, toolchain: Toolchain, settings: Settings, engine: Any = None
    ) -> None:
        self.engine = engine if engine is not None else engine_mod.acquire(settings)
        self._owns = engine is None
        self.spec = spec
        self.local = NvccCompiler.from_settings(spec, toolchain, settings, search=True)
        # an absolute cache: a worker on this host may run in another working directory
        shared = dataclasses.replace(settings, cache_dir=Path(settings.cache_dir).resolve())
        self.recipe = CompileRecipe(spec, toolchain, shared, self.engine.host)
        self.jobs = self.engine.wait_for(engine_mod.COMPILE, "CPU compile workers")
        self.tasks = 0  # compiles sent to the engine (cache hits are answered here)

    # --- the Compiler protocol ------------------------------------------------------------
    def submit(self, candidate: Candidate, problem: Problem) -> Future[Build]:
        hit = self.lookup(candidate, problem)
        if hit is not None:
            done: Future[Build] = Future()
            done.set_result(hit)
            return done
        self.tasks += 1
        task = self.engine.client.submit(
            compile_task,
            self.recipe,
            candidate,
            problem,
            key=f"ctune-compile-{candidate.key()}-{os.urandom(4).hex()}",
            resources={engine_mod.COMPILE: 1},
            pure=False,
        )
        return EngineFuture(
            task, lambda value, error: self._settle(candidate, problem, value, error)
        )

    def build(self, candidate: Candidate, problem: Problem) -> Build:
        return self.submit(candidate, problem).result()

    def lookup(self, candidate: Candidate, problem: Problem) -> Build | None:
        """The local cache's build (or a restriction's INVALID), without the engine."""
        return self.local.lookup(candidate, problem)

    # --- results -------------------------------------------------------------------------
    def _settle(
        self, candidate: Candidate, problem: Problem, value: Any, error: BaseException | None
    ) -> Build:
        if killed_worker(error):
            argv = self.local.argv(candidate, problem, self.local.builds_dir / "_" / "kernel.cubin")
            return Build(
                candidate.key(),
                tuple(argv),
                self.local.toolchain.describe(),
                Outcome.COMPILER_CRASH,
                log_tail=(
                    "the engine's compile worker died twice while compiling this candidate "
                    f"(retried once on another worker): {error}"
                )[-LOG_TAIL_CHARS:],
            )
        if error is not None:
            raise error  # a SpecError (wrong args) or a ctune bug: not the candidate's
        build, files = value
        if files and build.build_key:
            build = self._import(build, files)
        return build

    def _import(self, build: Build, files: dict[str, bytes]) -> Build:
        """Write a build made on another host into the local cache, by its build key."""
        final = self.local.builds_dir / build.build_key
        binary = Path(build.binary_path).name if build.binary_path else None
        if not (final / "build.json").is_file():
            self.local.builds_dir.mkdir(parents=True, exist_ok=True)
            work = Path(
                tempfile.mkdtemp(prefix=f".{build.build_key[:8]}-", dir=self.local.builds_dir)
            )
            try:  # a full disk leaves no half-imported entry behind
                for name, data in files.items():
                    (work / Path(name).name).write_bytes(data)
                if "build.json" in files:
                    record = build_from_json(json.loads(files["build.json"]))
                    if binary is not None:
                        record = dataclasses.replace(record, binary_path=str(final / binary))
                    (work / "build.json").write_text(json.dumps(to_json(record), indent=2))
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
            try:
                os.replace(work, final)
            except OSError:  # another thread imported it first
                shutil.rmtree(work, ignore_errors=True)
        if binary is None:
            return build
        return dataclasses.replace(build, binary_path=str(final / binary))

    def close(self) -> None:
        if self._owns and self.engine is not None:
            engine_mod.release(self.engine)
            self.engine = None

    def __enter__(self) -> EngineCompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["EngineCompiler"]
