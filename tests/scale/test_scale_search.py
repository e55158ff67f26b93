"""Searches whose measurement runs on the engine's GPU workers (a local Dask cluster).

The GPU workers are real engine workers in their own processes; what they host is a
stand-in measurer (NOT A GPU), so these run on a CPU. Builds come from the stand-in
compiler; tests/scale/test_scale_nvcc.py compiles for real through the engine.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.objective import parse_objective_spec
from ctune.records import Build, Candidate, Outcome
from ctune.scale.engine import GPU, Engine
from ctune.scale.measurer import EngineMeasurer
from ctune.scale.tasks import MeasurerFactory
from ctune.search import journal as journal_mod
from ctune.search.confirm import min_processes
from ctune.search.driver import SearchOptions, run_search
from ctune.search.events import SearchEvent, TrialFinished
from ctune.search.result import SearchResult
from ctune.spec import KernelSpec, Problem
from ctune.testing.standins import StandInCompiler, StandInMeasurer, standin_spec

pytest.importorskip("distributed", reason="no cluster extra (dask, distributed)")

Factory = Callable[..., MeasurerFactory]


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    return standin_spec(tmp_path / "kernel")


def search(
    settings: Settings,
    spec: KernelSpec,
    measurer: Any,
    on_event: Callable[[SearchEvent], None] | None = None,
    compiler: StandInCompiler | None = None,
    **options: Any,
) -> SearchResult:
    options = {"budget": 14, "seed": 11, "fill": False, "journal_fsync": False, **options}
    options.setdefault("confirm_processes", 2)
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    return run_search(
        settings,
        spec,
        objective,
        SearchOptions(**options),
        compiler=compiler or StandInCompiler(spec),
        measurer=measurer,
        on_event=on_event,
    )


def journal_rows(path: Path) -> list[tuple[str, str, tuple[float, ...] | None]]:
    replay, _ = journal_mod.read(path)
    return [(t.candidate.key(), t.outcome.value, t.values) for t in replay.trials]


def test_two_gpu_workers_give_the_local_search_same_seed(
    engine: Engine, spec: KernelSpec, tmp_path: Path, standin: Factory
) -> None:
    local = search(Settings(cache_dir=tmp_path / "a"), spec, StandInMeasurer(seed=3, samples=40))
    with EngineMeasurer(Settings(cache_dir=tmp_path / "b"), engine, standin(3)) as pool:
        assert pool.slots == 2  # two candidates measured at once
        remote = search(Settings(cache_dir=tmp_path / "b"), spec, pool)
    assert remote.evaluations == local.evaluations == 14
    assert journal_rows(remote.journal) == journal_rows(local.journal)
    assert [m.key for m in remote.front] == [m.key for m in local.front]
    assert remote.timing.measure_s >= 0.0


class LateRowBuilds(StandInCompiler):
    """NOT NVCC: the stand-in's builds, those with SCHEDULE "row" ready 0.15 s late, so a
    batch's later candidates can reach the GPUs before an earlier twin's build is done."""

    def submit(self, candidate: Candidate, problem: Problem) -> Future[Build]:
        build = self.build(candidate, problem)  # now: request order decides the failures
        if candidate.as_dict()["SCHEDULE"] != "row":
            return super().submit(candidate, problem)
        future: Future[Build] = Future()
        threading.Timer(0.15, future.set_result, (build,)).start()
        return future


def gpu_runs_per_binary(markers: Path, replay: Any) -> tuple[list[str], int]:
    """The candidate keys the GPU workers measured, and how many binaries they were (a
    twin's key counts as its source's binary)."""
    keys = [m.name.split("-")[0] for m in markers.iterdir()]
    return keys, len({replay.same_binary.get(k, k) for k in keys})


@pytest.mark.parametrize("compiler", [StandInCompiler, LateRowBuilds])
def test_two_gpus_measure_each_binary_once(
    engine: Engine,
    spec: KernelSpec,
    settings: Settings,
    tmp_path: Path,
    standin: Factory,
    compiler: type[StandInCompiler],
) -> None:
    """Candidates whose binary was measured already, or is being measured on the other
    GPU, take that measurement: the GPUs measure each binary once, as a local run does,
    and the journal says what a local run's would (the first in ask order measured)."""
    markers = tmp_path / "markers"  # one per measurement a GPU worker made
    twins = compiler(spec, noop_genes=("SCHEDULE",))
    factory = standin(4, sleep_s=0.02, marker_dir=str(markers))
    with EngineMeasurer(settings, engine, factory) as pool:
        result = search(
            settings, spec, pool, compiler=twins, budget=30, seed=4, confirm_processes=0
        )
    replay, _ = journal_mod.read(result.journal)
    assert replay.same_binary, "the search never proposed a SCHEDULE-only variant"
    keys, binaries = gpu_runs_per_binary(markers, replay)
    measured = [t for t in replay.trials if t.measurement is not None]
    assert len(keys) == binaries == len(measured) - len(replay.same_binary)
    number = {t.candidate.key(): t.number for t in replay.trials}
    assert all(number[src] < number[twin] for twin, src in replay.same_binary.items())
    if compiler is LateRowBuilds:  # a later twin measured first: its run was adopted
        assert set(keys) & set(replay.same_binary)


def test_measuring_processes_start_with_the_search_on_every_gpu(
    engine: Engine, spec: KernelSpec, settings: Settings, tmp_path: Path, standin: Factory
) -> None:
    """Each GPU worker is asked, as the search starts, to start its measuring process and
    the confirmation's spares, and to have them set the search's problem up; the
    confirmation rounds then find them up."""
    events = tmp_path / "events"
    with EngineMeasurer(settings, engine, standin(6, events_dir=str(events))) as pool:
        result = search(settings, spec, pool, budget=10, confirm_processes=3)
    assert result.confirmation is not None and result.confirmation.processes >= 2
    seen = [e.name.split("-") for e in events.iterdir()]
    started = f"prestart{1 + min(min_processes(), 3)}"  # its worker + the sure rounds' spares
    workers = {pid for what, pid, _ in seen if what == started}
    assert len(workers) == 2  # both GPU workers
    set_up = {pid: int(ns) for what, pid, ns in seen if what == f"setupahead{spec.problem().name}"}
    assert set(set_up) == workers  # each GPU worker, after its start
    assert all(int(ns) < set_up[pid] for what, pid, ns in seen if what == started)
    first_round = min(int(ns) for what, _, ns in seen if what == "remeasure")
    assert all(int(ns) < first_round for what, _, ns in seen if what == started)
    rounds = [pid for what, pid, _ in seen if what == "remeasure"]
    assert len(rounds) == result.confirmation.processes and set(rounds) <= workers


def test_prestart_asked_to_wait_waits_on_every_gpu(
    engine: Engine, settings: Settings, tmp_path: Path, standin: Factory
) -> None:
    """``prestart(wait=True)`` reaches each GPU worker's measurer as a wait (it returns once
    their processes are up), as ``WorkerMeasurer.prestart`` does locally."""
    events = tmp_path / "events"
    with EngineMeasurer(settings, engine, standin(6, events_dir=str(events))) as pool:
        pool.prestart(2, wait=True)
        pool.prestart(3, wait=False)
    seen = [e.name.split("-") for e in events.iterdir()]
    assert len({pid for what, pid, _ in seen if what == "prestart2w"}) == 2
    assert len({pid for what, pid, _ in seen if what == "prestart3"}) == 2


def _kill_twice(markers: Path, skip: str, killed: list[int], stop: threading.Event) -> None:
    """SIGKILL the GPU worker measuring the first candidate other than ``skip``; when the
    engine runs that measurement again, kill that worker too."""
    target = ""
    while not stop.is_set() and len(killed) < 2:
        for mark in sorted(markers.glob("*"), key=lambda p: int(p.name.split("-")[2])):
            key, pid = mark.name.split("-")[0], int(mark.name.split("-")[1])
            if key == skip or (target and key != target) or pid in killed:
                continue
            target = key
            os.kill(pid, signal.SIGKILL)  # a worker of the test's own cluster
            killed.append(pid)
            break
        time.sleep(0.02)


def test_a_killed_gpu_worker_is_replaced_and_the_search_goes_on(
    engine: Engine, spec: KernelSpec, settings: Settings, tmp_path: Path, standin: Factory
) -> None:
    markers = tmp_path / "markers"
    factory = standin(5, sleep_s=0.3, marker_dir=str(markers))
    killed: list[int] = []
    stop = threading.Event()
    with EngineMeasurer(settings, engine, factory) as pool:
        killer = threading.Thread(
            target=_kill_twice,
            args=(markers, spec.default_candidate().key(), killed, stop),
            daemon=True,
        )
        killer.start()
        try:
            result = search(settings, spec, pool, budget=10)
        finally:
            stop.set()
            killer.join()
        assert pool.deaths == 1
    assert len(killed) == 2
    assert result.evaluations == 10 and result.stop_reason == "budget"
    replay, _ = journal_mod.read(result.journal)
    died = [
        t
        for t in replay.trials
        if t.measurement is not None and "GPU worker died twice" in t.measurement.error
    ]
    assert len(died) == 1 and died[0].outcome is Outcome.RUNTIME_FAULT
    # the engine replaced both workers: two GPU workers again, neither a killed one
    deadline = time.monotonic() + 30
    while engine.total(GPU) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert engine.total(GPU) == 2
    assert not set(engine.client.run(os.getpid).values()) & set(killed)


def test_ctrl_c_keeps_the_journal_and_the_search_resumes(
    engine: Engine, spec: KernelSpec, settings: Settings, standin: Factory
) -> None:
    seen: list[int] = []

    def interrupt(event: SearchEvent) -> None:
        if isinstance(event, TrialFinished):
            seen.append(event.trial.number)
            if len(seen) == 5:
                os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C

    with EngineMeasurer(settings, engine, standin(7, sleep_s=0.05)) as pool:
        first = search(settings, spec, pool, on_event=interrupt)
        assert first.stop_reason == "interrupted"
        kept = first.journal.read_bytes()
        rows = journal_rows(first.journal)
        assert 5 <= len(rows) < 14
        resumed = search(settings, spec, pool, resume=first.journal)
    assert resumed.stop_reason == "budget" and resumed.evaluations == 14
    assert resumed.journal.read_bytes().startswith(kept)  # nothing written before was lost
    assert journal_rows(resumed.journal)[: len(rows)] == rows


def _nvml_diagnostics() -> bool:
    import dask

    return bool(dask.config.get("distributed.diagnostics.nvml"))


def test_the_workers_started_here_leave_nvml_to_ctune(engine: Engine) -> None:
    """Every worker of the cluster ctune starts has distributed's NVML diagnostics off:
    their probe at a worker's start failed on a GPU host whose NVML refused one query,
    and then no worker started (docs/scale-out.md)."""
    import dask

    assert dask.config.get("distributed.diagnostics.nvml")  # on where ctune runs
    answers = engine.client.run(_nvml_diagnostics)
    assert len(answers) == 4 and not any(answers.values())
