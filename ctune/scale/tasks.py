"""What runs on the engine's workers: one compile, one measurement, a re-measurement.

A worker keeps its NvccCompiler and its measurer between tasks (module state of the
worker process): the measurer's worker subprocess stays warm on its GPU, as it does in
a local run, and a new one replaces it after a fault. Everything here is called by
Dask in a worker process; nothing here talks to the scheduler.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.scale.engine import host_token

if TYPE_CHECKING:
    from ctune.compile.nvcc import NvccCompiler
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings
    from ctune.measure import Measurer, SamplingPlan
    from ctune.records import Build, Candidate, Measurement
    from ctune.spec import KernelSpec, Problem

_LOCK = threading.Lock()
_COMPILERS: dict[tuple[str, ...], NvccCompiler] = {}
_MEASURERS: dict[str, Measurer] = {}


@dataclass(frozen=True)
class CompileRecipe:
    """How to make the NvccCompiler a worker compiles with (sent with every task)."""

    spec: KernelSpec
    toolchain: Toolchain
    settings: Settings
    host: str  # the client's host token: a worker on it shares the build cache by path

    def key(self) -> tuple[str, ...]:
        s = self.settings
        return (
            str(self.spec.yaml_path),
            self.spec.name,
            self.toolchain.nvcc,
            self.toolchain.describe(),
            str(s.cache_dir),
            s.arch,
            str(s.compile_timeout_s),
            str(s.compile_memory_bytes),
            str(s.relink),
        )


@dataclass(frozen=True)
class MeasurerFactory:
    """Which measurer a GPU worker hosts: ``module:Class`` built with ``settings`` and
    ``kwargs`` (``WorkerMeasurer`` on device 0 of the worker's one visible GPU, or a
    stand-in in tests)."""

    target: str = "ctune.measure.session:WorkerMeasurer"
    kwargs: dict[str, Any] = field(default_factory=dict)
    takes_settings: bool = True

    def key(self) -> str:
        return f"{self.target}:{sorted(self.kwargs.items())!r}"

    def cls(self) -> type:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]

    def make(self, settings: Settings) -> Measurer:
        made: Measurer
        if self.takes_settings:
            made = self.cls()(settings=settings, **self.kwargs)
        else:
            made = self.cls()(**self.kwargs)
        return made


# --- compiling -------------------------------------------------------------------------------


def _compiler(recipe: CompileRecipe) -> NvccCompiler:
    from ctune.compile.nvcc import NvccCompiler

    with _LOCK:
        compiler = _COMPILERS.get(recipe.key())
        if compiler is None:
            settings, toolchain = recipe.settings, recipe.toolchain
            if recipe.host != host_token():
                # another host: its own cache; the binary goes back by content
                settings = replace(settings, cache_dir=_local_dir() / "ctune-cache")
                if toolchain.split:  # the client's split folder is in the client's cache
                    from ctune.compile.select_toolchain import toolchain_for

                    toolchain = toolchain_for(settings)
            compiler = NvccCompiler.from_settings(recipe.spec, toolchain, settings, search=True)
            _COMPILERS[recipe.key()] = compiler
        return compiler


def _local_dir() -> Path:
    from distributed import get_worker

    return Path(get_worker().local_directory)


def compile_task(
    recipe: CompileRecipe, candidate: Candidate, problem: Problem
) -> tuple[Build, dict[str, bytes]]:
    """Build one candidate; on another host than the client, also the cache entry's files."""
    build = _compiler(recipe).build(candidate, problem)
    files: dict[str, bytes] = {}
    if recipe.host != host_token() and build.build_key and build.outcome.value != "invalid":
        folder = _compiler(recipe).builds_dir / build.build_key
        if folder.is_dir():
            files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    return build, files


# --- measuring -------------------------------------------------------------------------------


def _measurer(factory: MeasurerFactory, settings: Settings) -> Measurer:
    with _LOCK:
        measurer = _MEASURERS.get(factory.key())
        if measurer is None:
            measurer = factory.make(settings)
            _MEASURERS[factory.key()] = measurer
        return measurer


def _local_build(build: Build, binary: bytes | None) -> Build:
    """A build whose binary came by value: written under this worker's folder by content."""
    if binary is None or build.binary_path is None:
        return build
    from ctune.records import sha256_hex

    folder = _local_dir() / "ctune-binaries" / sha256_hex(binary)[:32]
    target = folder / Path(build.binary_path).name
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        scratch = folder / f".{target.name}.{threading.get_ident()}"
        scratch.write_bytes(binary)
        scratch.replace(target)
    return replace(build, binary_path=str(target))


def measure_task(
    factory: MeasurerFactory,
    settings: Settings,
    spec: KernelSpec,
    candidate: Candidate,
    build: Build,
    problem: Problem,
    plan: SamplingPlan,
    baseline_s: float | None,
    binary: bytes | None = None,
) -> Measurement:
    """One measurement by this GPU worker's measurer (its hang limit from the run's baseline)."""
    measurer = _measurer(factory, settings)
    if baseline_s is not None and measurer.baseline_s is None:
        measurer.set_baseline(baseline_s)
    local = _local_build(build, binary)
    measurement: Measurement = measurer.measure(spec, candidate, local, problem, plan)
    return measurement


def remeasure_task(
    factory: MeasurerFactory,
    settings: Settings,
    spec: KernelSpec,
    items: list[tuple[Candidate, Build, bytes | None]],
    problem: Problem,
    plan: SamplingPlan,
    processes: int,
    seed: int | None = None,
) -> dict[str, list[Measurement]]:
    """The confirmation, all on this one GPU: baseline and front compare on one device."""
    measurer = _measurer(factory, settings)
    pairs = [(c, _local_build(b, blob)) for c, b, blob in items]
    runs = measurer.remeasure(spec, pairs, problem, plan, processes, seed=seed)
    return runs


def prestart_task(factory: MeasurerFactory, settings: Settings, count: int, wait: bool) -> None:
    """Start this GPU worker's measuring processes now (``count``: its worker and spares),
    so that its first measurement and the confirmation's rounds do not wait for a start;
    ``wait``: return once they are up, else at once. Run by ``Client.run``, not a task."""
    _measurer(factory, settings).prestart(count, wait=wait)


def set_up_ahead_task(
    factory: MeasurerFactory,
    settings: Settings,
    spec: KernelSpec,
    candidate: Candidate,
    problem: Problem,
    plan: SamplingPlan,
) -> None:
    """Ask this GPU worker's measuring processes (started by :func:`prestart_task`) to set
    ``problem`` up as soon as each is up, as ``WorkerMeasurer.set_up_ahead`` does locally.
    Run by ``Client.run``, not a task."""
    _measurer(factory, settings).set_up_ahead(spec, candidate, problem, plan)


def probe_task(factory: MeasurerFactory, settings: Settings) -> dict[str, Any]:
    """What a GPU worker's measurer offers: capabilities and the device name if it says."""
    measurer = _measurer(factory, settings)
    caps = measurer.capabilities
    if caps is None:
        from ctune.measure.capabilities import probe_capabilities

        caps = frozenset(probe_capabilities())
    return {
        "capabilities": sorted(caps),
        "device_name": measurer.device_name,
        "fingerprint_fields": measurer.fingerprint_fields(),
    }


def close_task() -> None:
    """Close this worker's measurers (their GPU subprocesses) at the end of a search."""
    with _LOCK:
        measurers = list(_MEASURERS.values())
        _MEASURERS.clear()
    for measurer in measurers:
        measurer.close()


__all__ = [
    "CompileRecipe",
    "MeasurerFactory",
    "close_task",
    "compile_task",
    "measure_task",
    "prestart_task",
    "probe_task",
    "remeasure_task",
    "set_up_ahead_task",
]
