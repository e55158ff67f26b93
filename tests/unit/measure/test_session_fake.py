"""WorkerMeasurer's fault handling against a stand-in worker (no GPU): the parent's logic
for sticky faults, deaths, hangs, health checks and interleaved re-measurement."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from ctune.errors import DeviceUnhealthy, ToolchainError, UserError
from ctune.measure import SamplingPlan
from ctune.measure.session import (
    HarnessError,
    WorkerMeasurer,
    measure_in_fresh_processes,
    remeasure,
)
from ctune.records import Build, Candidate, Outcome
from ctune.spec import load_spec

FAKE = Path(__file__).with_name("fake_worker.py")
SPEC = Path(__file__).parents[2] / "data" / "kernels" / "faults.yaml"
PLAN = SamplingPlan(timeout_s=0)


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC)


def make(mode: int, **genes: object) -> tuple[Candidate, Build]:
    candidate = Candidate.of("faults", {"MODE": mode, "KEY": f"m{mode}", **genes})
    build = Build(candidate.key(), ("nvcc",), "stand-in", Outcome.OK, binary_path="/nonexistent")
    return candidate, build


def measurer(tmp_path: Path, *extra: str, **options: object) -> WorkerMeasurer:
    argv = [sys.executable, str(FAKE), "--health", str(tmp_path / "health"), *extra]
    return WorkerMeasurer(worker_argv=argv, **options)  # type: ignore[arg-type]


def ended(pids: Iterable[int], within_s: float = 5.0) -> bool:
    """Whether every process has ended (and been reaped), waiting up to ``within_s``: a
    measurer's close returns once each answered its exit, not once each has ended."""
    pids = list(pids)
    deadline = time.monotonic() + within_s
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); look at its state
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped meanwhile
        return False


def test_ok_then_sticky_fault_then_ok_replaces_the_worker(tmp_path, spec):
    problem = spec.problem()
    with measurer(tmp_path) as m:
        first = m.measure(spec, *make(0), problem, PLAN)
        assert first.outcome is Outcome.OK
        pid = m.worker_pid
        assert m.baseline_s is not None and m.baseline_s == first.wall_s
        fault = m.measure(spec, *make(1), problem, PLAN)
        assert fault.outcome is Outcome.RUNTIME_FAULT
        assert "cudaErrorAssert" in fault.error
        assert "Assertion" in fault.error  # the worker's stderr is part of the evidence
        assert m.worker_pid is None
        after = m.measure(spec, *make(0), problem, PLAN)
        assert after.outcome is Outcome.OK
        assert m.worker_pid not in (None, pid)
        assert len(m.recoveries_s) == 1 and m.recoveries_s[0] < 30
        assert m.workers_started == 2


def test_worker_killed_by_a_signal_is_a_runtime_fault(tmp_path, spec):
    with measurer(tmp_path) as m:
        died = m.measure(spec, *make(2), spec.problem(), PLAN)
        assert died.outcome is Outcome.RUNTIME_FAULT
        assert "SIGSEGV" in died.error and "about to crash" in died.error
        assert m.measure(spec, *make(0), spec.problem(), PLAN).outcome is Outcome.OK


def test_hang_kills_the_whole_process_group(tmp_path, spec):
    pidfile = tmp_path / "grandchild"
    with measurer(tmp_path, "--pidfile", str(pidfile)) as m:
        started = time.monotonic()
        hung = m.measure(spec, *make(3), spec.problem(), SamplingPlan(timeout_s=1.5))
        assert hung.outcome is Outcome.RUN_TIMEOUT
        assert 1.4 <= hung.wall_s < 10 and time.monotonic() - started < 20
        assert "1.5 s" in hung.error
        grandchild = int(pidfile.read_text())
        deadline = time.monotonic() + 5
        while alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(grandchild)
        assert m.measure(spec, *make(0), spec.problem(), PLAN).outcome is Outcome.OK


def test_a_new_problem_is_set_up_outside_the_hang_limit(tmp_path, spec):
    """A new shape's first request pays CuPy's compiling (13-17 s on a bare machine): it is
    set up under its own limit, once per problem and worker, so a correct kernel is not
    killed as hung (on an H200, S = 1 attention was, at the 10 s hang limit)."""
    plan = SamplingPlan(timeout_s=1.0)  # the hang limit: 1 s
    problem = spec.problem()
    with measurer(tmp_path, "--setup-s", "1.5") as m:
        first = m.measure(spec, *make(0), problem, plan)
        assert first.outcome is Outcome.OK, first.error
        second = m.measure(spec, *make(0, KEY="b"), problem, plan)
        assert second.outcome is Outcome.OK, second.error
        assert _note(second)["prepared"] == "1"  # set up once, not per candidate
        assert second.wall_s < 1.0


def test_launch_error_keeps_the_worker(tmp_path, spec):
    with measurer(tmp_path) as m:
        assert m.measure(spec, *make(0), spec.problem(), PLAN).outcome is Outcome.OK
        pid = m.worker_pid
        bad = m.measure(spec, *make(6), spec.problem(), PLAN)
        assert bad.outcome is Outcome.LAUNCH_ERROR
        assert m.worker_pid == pid


def test_user_and_internal_errors_raise(tmp_path, spec):
    with measurer(tmp_path) as m:
        with pytest.raises(UserError, match="spec: bad"):
            m.measure(spec, *make(4), spec.problem(), PLAN)
        with pytest.raises(HarnessError, match="boom"):
            m.measure(spec, *make(5), spec.problem(), PLAN)
        assert m.measure(spec, *make(0), spec.problem(), PLAN).outcome is Outcome.OK


def test_unhealthy_replacement_raises_device_unhealthy(tmp_path, spec):
    with measurer(tmp_path, health_timeout_s=1.5) as m:
        assert m.measure(spec, *make(0), spec.problem(), PLAN).outcome is Outcome.OK
        assert m.measure(spec, *make(1), spec.problem(), PLAN).outcome is Outcome.RUNTIME_FAULT
        (tmp_path / "health").write_text("bad")
        started = time.monotonic()
        with pytest.raises(DeviceUnhealthy, match="health check"):
            m.measure(spec, *make(0), spec.problem(), PLAN)
        assert time.monotonic() - started < 15


def test_no_gpu_at_first_start_is_a_toolchain_error(tmp_path, spec):
    with measurer(tmp_path, "--no-gpu") as m, pytest.raises(ToolchainError, match="no CUDA GPU"):
        m.measure(spec, *make(0), spec.problem(), PLAN)


def test_failed_build_is_not_measured(tmp_path, spec):
    candidate, _ = make(0)
    build = Build(candidate.key(), ("nvcc",), "stand-in", Outcome.COMPILE_ERROR, log_tail="x")
    with measurer(tmp_path) as m:
        result = m.measure(spec, candidate, build, spec.problem(), PLAN)
        assert result.outcome is Outcome.COMPILE_ERROR
        assert m.workers_started == 0  # no worker needed for that


def test_short_energy_window_is_refused_before_anything_runs(tmp_path, spec):
    with measurer(tmp_path) as m:
        with pytest.raises(UserError, match="at least 1 s"):
            m.measure(
                spec, *make(0), spec.problem(), SamplingPlan(energy=True, energy_window_s=0.5)
            )
        assert m.workers_started == 0


def test_remeasure_uses_fresh_processes_and_shuffles_order(tmp_path, spec):
    items = [make(0, ORDER=i) for i in range(6)]
    with measurer(tmp_path) as m:
        results = m.remeasure(spec, items, spec.problem(), PLAN, processes=3, seed=1)
    keys = [c.key() for c, _ in items]
    assert sorted(results) == sorted(keys)
    assert all(len(results[k]) == 3 for k in keys)
    pids, orders = set(), []
    for process in range(3):
        notes = {
            k: dict(f.split("=") for f in results[k][process].sampling_note.split()) for k in keys
        }
        process_pids = {n["pid"] for n in notes.values()}
        assert len(process_pids) == 1  # every item of a round ran in the same process
        pids |= process_pids
        orders.append(sorted(keys, key=lambda k: int(notes[k]["seq"])))
    assert len(pids) == 3  # a fresh process per round
    assert len({tuple(o) for o in orders}) > 1  # interleaved: not the same order every round
    # each fresh process set up its first measurement before it (once); and after close
    # every process is gone (the rounds' parked ones too)
    assert all(_note(results[o[0]][p])["prepared"] == "1" for p, o in enumerate(orders))
    assert ended(int(pid) for pid in pids)


def _note(measurement) -> dict[str, str]:
    """The stand-in worker's note (pid, seq, set_up_at, prepared, ahead) as a dict."""
    return dict(field.split("=") for field in measurement.sampling_note.split())


def test_the_first_measurement_sets_the_spares_up_for_confirmation(tmp_path, spec):
    """The spares started for confirmation are set up for the problem while the first
    measurement's worker is (side by side, nothing timed): each round's fresh worker then
    measures without setting the problem up first."""
    items = [make(0, ORDER=i) for i in range(2)]
    with measurer(tmp_path, "--setup-s", "0.5") as m:
        m.prestart(1 + 3, wait=False)  # the worker and 3 spares, as a search starts them
        first = m.measure(spec, *make(0), spec.problem(), PLAN)
        assert first.outcome is Outcome.OK
        confirming = time.monotonic()
        results = m.remeasure(spec, items, spec.problem(), PLAN, processes=3)
    runs = [run for each in results.values() for run in each]
    notes = [_note(run) for run in runs]
    assert len(notes) == 6 and len({n["pid"] for n in notes}) == 3
    assert all(float(n["set_up_at"]) < confirming for n in notes)
    # side by side: the four set-ups (0.5 s each) ended within one set-up of each other
    ends = [float(n["set_up_at"]) for n in [*notes, _note(first)]]
    assert max(ends) - min(ends) < 0.5
    assert all(n["prepared"] == "1" for n in notes)  # once each, not again at the take-over


def test_set_up_ahead_sets_every_process_up_while_the_first_build_compiles(tmp_path, spec):
    """A search asks its processes to set the problem up as they start, before its first
    build exists: the first measurement then waits for no set-up (the live worker's, the
    spares'), the live worker answers its health check before setting up, and the
    confirmation's rounds set nothing up again."""
    setup_s = 1.0
    with measurer(tmp_path, "--setup-s", str(setup_s)) as m:
        m.prestart(1 + 3, wait=False)
        m.set_up_ahead(spec, *make(0)[:1], spec.problem(), PLAN)
        began = time.monotonic()
        m.device_info()  # the live worker's take-over: its health check came before its set-up
        assert time.monotonic() - began < setup_s
        time.sleep(1.5 * setup_s)  # the first build compiles meanwhile
        measuring = time.monotonic()
        first = m.measure(spec, *make(0), spec.problem(), PLAN)
        assert first.outcome is Outcome.OK
        assert time.monotonic() - measuring < setup_s  # no set-up was waited for
        results = m.remeasure(spec, [make(0, ORDER=i) for i in range(2)], spec.problem(), PLAN, 3)
    notes = [_note(first), *(_note(run) for each in results.values() for run in each)]
    assert len({n["pid"] for n in notes}) == 4
    assert all(float(n["set_up_at"]) < measuring for n in notes)
    assert all(n["prepared"] == n["ahead"] == "1" for n in notes)


def test_a_set_up_ahead_for_another_problem_is_not_taken_for_this_one(tmp_path, spec):
    """The first measurement's problem is not the one set up ahead: each process sets it
    up (with its build) before measuring, and the answers in flight do not get mixed."""
    other = spec.problem("n64m")  # the first measured is n64k, the default
    with measurer(tmp_path) as m:
        m.prestart(2, wait=False)
        m.set_up_ahead(spec, *make(0)[:1], other, PLAN)
        first = m.measure(spec, *make(0), spec.problem(), PLAN)
        again = m.remeasure(spec, [make(0)], spec.problem(), PLAN, processes=1)
    notes = [_note(first), *(_note(run) for each in again.values() for run in each)]
    assert len({n["pid"] for n in notes}) == 2
    assert all(n["prepared"] == "2" and n["ahead"] == "1" for n in notes)


def test_rounds_park_their_workers_until_close(tmp_path, spec):
    """A round's worker is not waited out at the next round's take-over: it stays, idle,
    until close (at most PARKED_MAX of them; beyond that the oldest exits first)."""
    from ctune.measure.session import PARKED_MAX

    rounds = PARKED_MAX + 2
    with measurer(tmp_path) as m:
        results = m.remeasure(spec, [make(0)], spec.problem(), PLAN, processes=rounds)
        pids = [int(_note(run)["pid"]) for run in next(iter(results.values()))]
        assert len(set(pids)) == rounds
        # the live one and PARKED_MAX parked are up; the oldest exited at the take-over
        # that would have parked one too many, before that round measured
        assert [alive(pid) for pid in pids] == [False] + [True] * (rounds - 1)
    assert ended(pids)


def test_remeasure_order_is_seeded(tmp_path, spec):
    items = [make(0, ORDER=i) for i in range(5)]

    def orders() -> list[list[str]]:
        with measurer(tmp_path) as m:
            results = m.remeasure(spec, items, spec.problem(), PLAN, processes=2, seed=7)
        out = []
        for process in range(2):
            seq = {
                k: int(r[process].sampling_note.split("seq=")[1].split()[0])
                for k, r in results.items()
            }
            out.append(sorted(seq, key=seq.__getitem__))
        return out

    assert orders() == orders()


def test_close_ends_the_worker(tmp_path, spec):
    m = measurer(tmp_path)
    m.measure(spec, *make(0), spec.problem(), PLAN)
    pid = m.worker_pid
    assert pid is not None
    m.close()
    assert ended([pid])


def test_close_does_not_wait_for_the_processes_to_end(tmp_path, spec):
    """Each process's end after its exit answer (a real worker's: the driver releasing its
    context) is waited for in the background, every process's at once, and reaped there."""
    m = measurer(tmp_path, "--exit-s", "1.5")
    m.prestart(3, wait=True)  # the worker and two spares
    m.measure(spec, *make(0), spec.problem(), PLAN)
    pids = [m.worker_pid, *(spare.pid for spare, _ in m._spares)]
    assert len(set(pids)) == 3 and None not in pids
    start = time.monotonic()
    m.close()
    assert time.monotonic() - start < 1.0
    assert all(alive(pid) for pid in pids)  # still ending
    assert ended(pids, within_s=5.0)  # then gone, and reaped (no zombie left)


def test_garbage_collected_measurer_leaves_no_worker(tmp_path, spec):
    import gc

    m = measurer(tmp_path)
    m.measure(spec, *make(0), spec.problem(), PLAN)
    pid = m.worker_pid
    assert pid is not None
    del m
    gc.collect()
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):  # pragma: no cover - cleanup if the assertion is about to fail
        os.killpg(pid, signal.SIGKILL)
    assert not alive(pid)


def test_module_level_helpers_use_fresh_processes(tmp_path, spec):
    argv = [sys.executable, str(FAKE)]
    candidate, build = make(0)
    runs = measure_in_fresh_processes(
        spec, candidate, build, spec.problem(), PLAN, processes=3, worker_argv=argv
    )
    assert [r.outcome for r in runs] == [Outcome.OK] * 3
    assert len({r.sampling_note.split()[0] for r in runs}) == 3
    results = remeasure(
        spec,
        [make(0, ORDER=1), make(0, ORDER=2)],
        spec.problem(),
        PLAN,
        processes=2,
        worker_argv=argv,
    )
    assert all(len(v) == 2 for v in results.values())
