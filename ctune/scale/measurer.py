"""EngineMeasurer: measurement on the engine's GPU workers, one long-lived worker per GPU.

Each GPU worker hosts the same measurer as a local run (a ``WorkerMeasurer`` on its one
visible GPU), so faults and hangs are handled as locally; a GPU worker that dies is
restarted by its Nanny and the measurement retried once (docs/scale-out.md). ``slots`` is
the number of GPUs: the driver measures that many candidates at once (``start``). As
locally, the measuring processes and the confirmation's spares start with the search
(``prestart``) and set the search's problem up as soon as they are up (``set_up_ahead``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.measure import Measurer
from ctune.measure.plan import TypicalWall
from ctune.records import Measurement, Outcome
from ctune.scale import engine as engine_mod
from ctune.scale.futures import EngineFuture, killed_worker
from ctune.scale.tasks import (
    MeasurerFactory,
    measure_task,
    prestart_task,
    probe_task,
    remeasure_task,
    set_up_ahead_task,
)

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.measure import SamplingPlan
    from ctune.records import Build, Candidate
    from ctune.spec import KernelSpec, Problem


class EngineMeasurer(Measurer):
    """A :class:`~ctune.measure.Measurer` over the engine's GPU workers."""

    def __init__(
        self, settings: Settings, engine: Any = None, factory: MeasurerFactory | None = None
    ) -> None:
        self.engine = engine if engine is not None else engine_mod.acquire(settings)
        self._owns = engine is None
        self.settings = settings
        self.factory = factory or MeasurerFactory()
        self.slots = self.engine.wait_for(engine_mod.GPU, "one worker per GPU")
        self._by_value = not self.engine.one_host()  # binaries travel with the task
        self._typical = TypicalWall()
        self._lock = threading.Lock()
        self.deaths = 0  # measurements whose GPU worker died twice (recorded as faults)
        self._started: dict[str, Future[Measurement]] = {}  # candidate key -> its measurement
        probe = self._gpu_call(probe_task, self.factory, settings).result()
        self.capabilities = frozenset(probe["capabilities"])
        self.device_name = probe["device_name"]
        given = probe["fingerprint_fields"]  # what the hosted measurer says it is, if it does
        self._fingerprint_fields = dict(given) if given is not None else None

    def fingerprint_fields(self) -> dict[str, str] | None:
        """The hosted measurer's own fields (a stand-in's); None: the GPU is probed."""
        return dict(self._fingerprint_fields) if self._fingerprint_fields is not None else None

    def _gpu_call(self, fn: Any, *args: Any) -> Any:
        return self.engine.client.submit(
            fn,
            *args,
            key=f"ctune-{fn.__name__}-{os.urandom(6).hex()}",
            resources={engine_mod.GPU: 1},
            pure=False,
        )

    def _on_every_gpu(self, fn: Any, *args: Any) -> None:
        """Run ``fn(factory, settings, *args)`` on each GPU worker directly, not as a task:
        a task would go to any GPU worker, and tasks pinned to one wait forever if it dies."""
        gpus = list(self.engine.offering(engine_mod.GPU))
        if gpus:
            self.engine.client.run(
                fn, self.factory, self.settings, *args, workers=gpus, on_error="return"
            )

    def prestart(self, count: int, wait: bool = True) -> None:
        """Start ``count`` measuring processes on every GPU worker now, as
        ``WorkerMeasurer.prestart`` does locally (a later call tops them up); ``wait``: return
        once every GPU worker's are up."""
        self._on_every_gpu(prestart_task, count, wait)

    def set_up_ahead(
        self, spec: KernelSpec, candidate: Candidate, problem: Problem, plan: SamplingPlan
    ) -> None:
        """Ask every GPU worker's measuring processes to set ``problem`` up as soon as each
        is up, as ``WorkerMeasurer.set_up_ahead`` does locally."""
        self._on_every_gpu(set_up_ahead_task, spec, candidate, problem, plan)

    def _binary(self, build: Build) -> bytes | None:
        if not self._by_value or not build.outcome.is_ok or build.binary_path is None:
            return None
        path = Path(build.binary_path)
        return path.read_bytes() if path.is_file() else None

    # --- the Measurer protocol ------------------------------------------------------------
    def start(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Future[Measurement]:
        """Measure on the next free GPU; the future never fails for the candidate's sake.

        ``measure`` for the same candidate then answers with this measurement."""
        future = self._submit(spec, candidate, build, problem, plan)
        with self._lock:
            self._started[candidate.key()] = future
        return future

    def forget(self) -> None:
        """Drop started measurements nobody asked for (a batch cut short)."""
        with self._lock:
            started, self._started = self._started, {}
        for future in started.values():
            future.cancel()

    def _submit(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Future[Measurement]:
        task = self._gpu_call(
            measure_task,
            self.factory,
            self.settings,
            spec,
            candidate,
            build,
            problem,
            plan,
            self._typical.seconds,
            self._binary(build),
        )
        return EngineFuture(
            task, lambda value, error: self._settle(candidate, problem, plan, value, error)
        )

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        with self._lock:
            future = self._started.pop(candidate.key(), None)
        if future is None:
            future = self._submit(spec, candidate, build, problem, plan)
        return future.result()

    def _settle(
        self,
        candidate: Candidate,
        problem: Problem,
        plan: SamplingPlan,
        value: Any,
        error: BaseException | None,
    ) -> Measurement:
        if killed_worker(error):
            with self._lock:
                self.deaths += 1
            return Measurement(
                candidate.key(),
                problem.name,
                Outcome.RUNTIME_FAULT,
                l2_policy=plan.l2_policy,
                error=f"the GPU worker died twice while measuring this candidate (the engine "
                f"replaced it each time): {error}",
            )
        if error is not None:
            raise error  # DeviceUnhealthy, a bad plan, a ctune bug: the run's, not the candidate's
        measurement: Measurement = value
        with self._lock:
            if measurement.outcome.is_ok:
                self._typical.add(measurement.wall_s)
        return measurement

    def remeasure(
        self,
        spec: KernelSpec,
        items: Sequence[tuple[Candidate, Build]],
        problem: Problem,
        plan: SamplingPlan,
        processes: int,
        *,
        seed: int | None = None,
    ) -> dict[str, list[Measurement]]:
        """All on one GPU worker: the baseline and the front are compared on one device."""
        carried = [(c, b, self._binary(b)) for c, b in items]
        task = self._gpu_call(
            remeasure_task,
            self.factory,
            self.settings,
            spec,
            carried,
            problem,
            plan,
            processes,
            seed,
        )
        runs: dict[str, list[Measurement]] = task.result()
        return runs

    def close(self) -> None:
        if self.engine is None:
            return
        from ctune.scale.tasks import close_task

        # a worker gone or the cluster closing: its measurer went with it
        with contextlib.suppress(Exception):
            self.engine.client.run(close_task)
        if self._owns:
            engine_mod.release(self.engine)
        self.engine = None

    def __enter__(self) -> EngineMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["EngineMeasurer"]
