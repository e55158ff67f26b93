"""The parent side of measurement: worker processes, faults, hangs, health, re-measurement.

:class:`WorkerMeasurer` implements the :class:`~ctune.measure.Measurer` protocol. It keeps
one live worker (``python -m ctune.measure.worker``) per GPU, because a start is costly,
sends it one candidate at a time and turns whatever happens into a
:class:`~ctune.records.Measurement`: a sticky fault or a worker that dies mid-request is
RUNTIME_FAULT (exit status and stderr tail as evidence), a hang (rules R1-R3 in
docs/design.md) kills the worker's process group and is RUN_TIMEOUT. The next request then
starts a fresh worker, which must pass a health check or :class:`DeviceUnhealthy` ends the
run cleanly (completed trials are journaled).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.config import Settings
from ctune.errors import CtuneError, DeviceUnhealthy, ToolchainError, UserError
from ctune.interrupts import blocked, start_thread
from ctune.measure import Measurer, SamplingPlan
from ctune.measure.plan import TypicalWall, hang_timeout_s, setup_timeout_s, validate
from ctune.measure.worker import MeasureRequest, decode, encode, measure_message, parse_measurement
from ctune.records import DeviceInfo, Measurement, Outcome

if TYPE_CHECKING:
    from ctune.records import Build, Candidate
    from ctune.spec import KernelSpec, Problem

log = logging.getLogger(__name__)

HEALTH_TIMEOUT_S = 10.0  # a replacement must be healthy this soon after a fault
START_TIMEOUT_S = 60.0  # the first start of a run (cold caches, helper-kernel compile)
MAX_REQUESTS_PER_WORKER = 256  # loaded modules and libraries accumulate; recycle
STDERR_TAIL_CHARS = 1500
MAX_LINE_BYTES = 256 * 1024 * 1024
#: workers done with their fresh-process round, kept idle (an idle context does not slow a
#: measurement, as the spares' do not) and exited together at close: an exit tears its
#: context down, which must not overlap a measurement, so each round waited for it (0.12 s
#: on an H200). Bounded, as each holds its problem's memory, as many as a spare does.
PARKED_MAX = 4


class WorkerTimeout(Exception):
    """No complete answer before the deadline."""


class WorkerDied(Exception):
    """The worker's stdout closed: it exited or was killed."""

    def __init__(self, status: str, stderr_tail: str) -> None:
        super().__init__(status)
        self.status = status
        self.stderr_tail = stderr_tail


class WorkerStartError(Exception):
    """The worker reported that CUDA is unusable (``at_startup``), or failed its health check."""

    def __init__(self, message: str, at_startup: bool) -> None:
        super().__init__(message)
        self.at_startup = at_startup


class HarnessError(CtuneError):
    """The measurement worker failed in a way that is not the candidate's (a ctune bug)."""


class LineReader:
    """Splits a byte stream into lines; pure (tested with pipes on the CPU)."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buffer = bytearray()
        self.max_line_bytes = max_line_bytes

    def feed(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) > self.max_line_bytes and b"\n" not in self._buffer:
            raise ValueError(f"protocol line longer than {self.max_line_bytes} bytes")

    def pop(self) -> bytes | None:
        end = self._buffer.find(b"\n")
        if end < 0:
            return None
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


def worker_command(device: int, prefix: Sequence[str] | None = None) -> list[str]:
    base = list(prefix) if prefix else [sys.executable, "-m", "ctune.measure.worker"]
    return [*base, "--device", str(device)]


def worker_env() -> dict[str, str]:
    """The parent's environment plus this ctune on PYTHONPATH (source checkouts work too)."""
    import ctune

    root = Path(ctune.__file__).resolve().parent.parent
    env = dict(os.environ)
    if root.name not in ("site-packages", "dist-packages"):  # a checkout, not an install
        extra = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(root) + (os.pathsep + extra if extra else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _cleanup(proc: subprocess.Popen[bytes], stderr: Any) -> None:
    """Finalizer: never leave a worker (and the GPU context it holds) behind."""
    try:
        if proc.returncode is None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pass
    with contextlib.suppress(OSError):
        stderr.close()


class WorkerProcess:
    """One worker subprocess in its own session (process group), spoken to over pipes."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self._stderr = tempfile.TemporaryFile(prefix="ctune-worker-", suffix=".log")  # noqa: SIM115
        with blocked():  # a Ctrl-C is ctune's to act on: it never kills a worker
            self.proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                start_new_session=True,  # killpg reaches everything it started
                env=env,
                close_fds=True,
            )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._reader = LineReader()
        self._next_id = 1
        self._early: dict[int, dict[str, Any]] = {}  # answers read while waiting for another
        self._stderr_mark = 0
        self.requests = 0
        self._exit_id: int | None = None  # the exit request's id, once asked (begin_exit)
        self.started = time.monotonic()
        self._finalizer = weakref.finalize(self, _cleanup, self.proc, self._stderr)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None and self.proc.poll() is None

    def stderr_tail(self, chars: int = STDERR_TAIL_CHARS, since_request: bool = True) -> str:
        try:
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            start = max(self._stderr_mark if since_request else 0, size - chars)
            return os.pread(fd, size - start, start).decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def _wait_exit(self, timeout_s: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def _read(self, deadline: float) -> dict[str, Any]:
        while True:
            line = self._reader.pop()
            if line is not None:
                if not line.strip():
                    continue
                try:
                    return decode(line)
                except ValueError as exc:
                    raise HarnessError(
                        f"measurement worker wrote garbage on its protocol: {exc}"
                    ) from None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimeout()
            if not self._selector.select(remaining):
                continue
            try:
                chunk = os.read(self._fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                returncode = self._wait_exit(5.0)
                if returncode is None:
                    self.kill()
                    returncode = self.proc.returncode
                raise WorkerDied(describe_exit(returncode), self.stderr_tail())
            self._reader.feed(chunk)

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        message = self._read(time.monotonic() + timeout_s)
        if not message.get("ready"):
            raise WorkerStartError(str(message.get("error", "the worker did not start")), True)
        return message

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        return self.receive(self.send(message), timeout_s)

    def send(self, message: dict[str, Any]) -> int:
        """Write a request without waiting for its answer (:meth:`receive`); its id."""
        request_id = self._next_id
        self._next_id += 1
        try:
            self._stderr_mark = os.fstat(self._stderr.fileno()).st_size
        except OSError:
            self._stderr_mark = 0
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(encode({**message, "id": request_id}))
            self.proc.stdin.flush()
        except OSError:
            returncode = self._wait_exit(5.0)
            raise WorkerDied(describe_exit(returncode), self.stderr_tail()) from None
        return request_id

    def receive(self, request_id: int, timeout_s: float) -> dict[str, Any]:
        """The answer to the request :meth:`send` gave ``request_id``. Answers to other
        requests read meanwhile are kept for their own :meth:`receive` (several requests
        may be in flight: a set-up sent ahead, then a health check)."""
        deadline = time.monotonic() + timeout_s
        answer = self._early.pop(request_id, None)
        while answer is None:
            got = self._read(deadline)
            if got.get("id") == request_id:
                answer = got
            else:
                self._early[int(got["id"])] = got
        self.requests += 1
        return answer

    def kill(self) -> None:
        """SIGKILL the worker's process group and reap it."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self._wait_exit(10.0) is None:
            log.error("worker %d did not exit 10 s after SIGKILL", self.proc.pid)

    def reap(self, timeout_s: float = 5.0) -> None:
        """Wait for a worker that said it will exit; kill it if it does not."""
        if self._wait_exit(timeout_s) is None:
            self.kill()

    def close(self, timeout_s: float = 5.0) -> None:
        self.begin_exit()
        self.finish_exit(timeout_s)

    def begin_exit(self) -> None:
        """Ask the worker to exit without waiting: :meth:`finish_exit` waits (it may run
        meanwhile, e.g. a fresh worker's set-up)."""
        if not self.alive or self.proc.stdin is None:
            return
        self._exit_id = self._next_id
        self._next_id += 1
        with contextlib.suppress(OSError):
            self.proc.stdin.write(encode({"op": "exit", "id": self._exit_id}))
            self.proc.stdin.flush()

    def finish_exit(self, timeout_s: float = 5.0, wait: bool = True) -> None:
        """Wait for the answer to the exit :meth:`begin_exit` asked for, then for the process
        to end (kill it if it does not in ``timeout_s``), and release the pipes. Without
        ``wait`` its end is waited for in a thread: once it has answered, it runs nothing
        more on the GPU, and its end is the driver releasing its context, on nobody's path."""
        deadline = time.monotonic() + timeout_s
        if self.alive:
            with contextlib.suppress(WorkerTimeout, WorkerDied, HarnessError):
                while self._read(deadline).get("id") != self._exit_id:
                    pass  # a stale answer
        if wait or not self.alive:
            self._end(deadline)
        else:
            name = f"ctune-reap-{self.pid}"
            start_thread(self._end, deadline, name=name)

    def _end(self, deadline: float) -> None:
        """Reap the process (killed if not gone by ``deadline``) and release the pipes."""
        if self.alive:
            self.reap(max(0.1, deadline - time.monotonic()))
        self._selector.close()
        self._finalizer()


def _set_up_key(request: MeasureRequest) -> tuple[str, str]:
    """What a worker's set-up is for: (spec, problem); one set-up serves every candidate."""
    return (str(request.spec_path), request.problem)


@dataclasses.dataclass(frozen=True)
class _SetUpAhead:
    """A set-up sent to a process before it was needed (:meth:`WorkerMeasurer.set_up_ahead`):
    for which (spec, problem), its prepare's request id and, for the process that becomes
    the live worker, the id of the health check sent before it."""

    key: tuple[str, str]
    prepare_id: int
    health_id: int | None


class WorkerMeasurer(Measurer):
    """Measures candidates in a worker process on one GPU; survives faults and hangs.

    ``measure`` never raises for a candidate's failure. It raises
    :class:`UserError` for a bad plan or spec, :class:`ToolchainError` when no
    GPU (or NVML, for energy) is usable, :class:`DeviceUnhealthy` when a
    replacement worker is not healthy in time, :class:`HarnessError` for a
    ctune bug in the worker.
    """

    def __init__(
        self,
        device: int = 0,
        settings: Settings | None = None,
        *,
        health_timeout_s: float = HEALTH_TIMEOUT_S,
        start_timeout_s: float = START_TIMEOUT_S,
        max_requests_per_worker: int = MAX_REQUESTS_PER_WORKER,
        baseline_s: float | None = None,
        worker_argv: Sequence[str] | None = None,
    ) -> None:
        self.device = device
        self.settings = settings or Settings()
        self.health_timeout_s = health_timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_requests_per_worker = max_requests_per_worker
        self._typical = TypicalWall(baseline_s)
        self._argv = worker_command(device, worker_argv)
        self._worker: WorkerProcess | None = None
        self._info: DeviceInfo | None = None
        self._fault_at: float | None = None
        self._nvml_checked = False
        self.recoveries_s: list[float] = []  # fault -> healthy replacement, per fault
        self.workers_started = 0
        # processes started ahead (prestart), with their ready message once read: each is
        # fresh, it has measured nothing yet
        self._spares: list[tuple[WorkerProcess, dict[str, Any] | None]] = []
        # (spec, problem) set up per worker (the live one, the spares): a worker is set up
        # for a problem before it measures it; a worker gone is forgotten with it
        self._set_up: weakref.WeakKeyDictionary[WorkerProcess, set[tuple[str, str]]] = (
            weakref.WeakKeyDictionary()
        )
        self._parked: list[WorkerProcess] = []  # see PARKED_MAX
        # set-ups sent ahead and not yet answered, per process
        self._ahead: weakref.WeakKeyDictionary[WorkerProcess, _SetUpAhead] = (
            weakref.WeakKeyDictionary()
        )

    # --- state ------------------------------------------------------------------
    @property
    def baseline_s(self) -> float | None:
        """Wall time of a typical OK measurement so far (the hang limit scales with it)."""
        return self._typical.seconds

    def set_baseline(self, seconds: float | None) -> None:
        self._typical.seed(seconds)

    @property
    def worker_pid(self) -> int | None:
        return self._worker.pid if self._worker is not None and self._worker.alive else None

    def device_info(self) -> DeviceInfo:
        """The GPU this measurer uses (starts a worker if none is running)."""
        self._ensure_worker()
        assert self._info is not None
        return self._info

    # --- workers ------------------------------------------------------------------
    def prestart(self, count: int, wait: bool = True) -> None:
        """Start ``count`` fresh worker processes now, side by side, for the next
        measurements that need a fresh process (``restart``, ``remeasure``): their start
        (Python, CuPy, a CUDA context) then overlaps instead of adding up.
        ``wait``: return only when each is up, so that no context is created while a
        later measurement runs. A spare that fails to start is dropped here; the normal
        start, with its retries and errors, happens when it is needed."""
        while len(self._spares) < count:
            self._spares.append((WorkerProcess(self._argv, worker_env()), None))
        if not wait:
            return
        ready: list[tuple[WorkerProcess, dict[str, Any] | None]] = []
        for spare, message in self._spares:
            try:
                ready.append((spare, message or spare.wait_ready(self.start_timeout_s)))
            except (WorkerTimeout, WorkerDied, WorkerStartError):
                spare.kill()
                spare.close()
        self._spares = ready

    def set_up_ahead(
        self, spec: KernelSpec, candidate: Candidate, problem: Problem, plan: SamplingPlan
    ) -> None:
        """Ask each process started ahead (:meth:`prestart`) to set ``problem`` up as soon
        as it is up, without a module (no build exists yet), and the one that becomes the
        live worker to answer its health check first: the first measurement then waits for
        neither the live worker's set-up nor the spares' after the first build. Nothing is
        waited for here; the answers are collected before anything is timed, and a set-up
        that fails is done again where the problem is first measured, which reports what
        goes wrong."""
        validate(plan)
        request = MeasureRequest(spec.yaml_path, candidate, None, problem.name, plan)
        message, key = measure_message(0, request, op="prepare"), _set_up_key(request)
        for index, (process, _) in enumerate(self._spares):
            if process in self._set_up or process in self._ahead:
                continue
            try:
                next_live = index == 0 and self._worker is None
                health = process.send({"op": "health"}) if next_live else None
                self._ahead[process] = _SetUpAhead(key, process.send(message), health)
            except WorkerDied:
                continue  # its start says what went wrong, when it is needed

    def _settle_spares(self, request: MeasureRequest) -> list[tuple[WorkerProcess, int | None]]:
        """Wait until every spare is up before anything is timed: a process creating its
        CUDA context beside a measurement inflates its tail (docs/search.md).
        Then ask each new spare to set ``request``'s problem up, without waiting: the live
        worker sets it up meanwhile (:meth:`_spares_set_up` collects the answers), and a
        confirmation round then measures as soon as its spare takes over, instead of
        setting the problem up first. Returns (spare, request id, or None where it died on
        the request)."""
        if any(message is None for _, message in self._spares):
            self.prestart(len(self._spares), wait=True)
        message = measure_message(0, request, op="prepare")
        asked: list[tuple[WorkerProcess, int | None]] = []
        for spare, _ in self._spares:
            if spare not in self._set_up:
                sent = self._sent_ahead(spare, request)
                try:
                    asked.append((spare, spare.send(message) if sent is None else sent))
                except WorkerDied:
                    asked.append((spare, None))
        return asked

    def _sent_ahead(self, process: WorkerProcess, request: MeasureRequest) -> int | None:
        """The id of the set-up of ``request``'s problem sent ahead to ``process``, still
        unanswered; None where none was (one for another problem is forgotten: its answer
        comes first and is kept aside unread)."""
        ahead = self._ahead.pop(process, None)
        return ahead.prepare_id if ahead is not None and ahead.key == _set_up_key(request) else None

    def _spares_set_up(
        self, asked: list[tuple[WorkerProcess, int | None]], request: MeasureRequest
    ) -> None:
        """Collect the spares' set-up answers; a spare that hangs or dies on it is dropped
        (one is started again when needed), one that reports an error is set up again when
        it takes over, and its measurement says what goes wrong."""
        deadline = time.monotonic() + setup_timeout_s(self._hang_limit(request.plan))
        key = _set_up_key(request)
        for spare, request_id in asked:
            answer = None
            if request_id is not None:
                with contextlib.suppress(WorkerTimeout, WorkerDied, HarnessError):
                    answer = spare.receive(request_id, max(0.1, deadline - time.monotonic()))
            if answer is None:
                self._spares = [(s, m) for s, m in self._spares if s is not spare]
                spare.kill()
                spare.close()
            else:
                self._set_up[spare] = {key} if answer.get("ok") else set()

    def _spawn(self, timeout_s: float) -> tuple[WorkerProcess, DeviceInfo]:
        worker, ready = (
            self._spares.pop(0) if self._spares else (WorkerProcess(self._argv, worker_env()), None)
        )
        deadline = time.monotonic() + timeout_s
        try:
            ready = ready or worker.wait_ready(timeout_s)
            ahead = self._ahead.get(worker)
            left = max(0.5, deadline - time.monotonic())
            health = (
                worker.receive(ahead.health_id, left)
                if ahead is not None and ahead.health_id is not None
                else worker.request({"op": "health"}, left)
            )
            if not health.get("ok") or not health.get("healthy"):
                raise WorkerStartError(
                    f"health check failed: {health.get('detail') or health.get('error')}", False
                )
            info = DeviceInfo(**ready["device"])
        except BaseException:
            worker.kill()
            worker.close()
            raise
        return worker, info

    def _ensure_worker(self) -> WorkerProcess:
        worker = self._worker
        if worker is not None and worker.alive and worker.requests < self.max_requests_per_worker:
            return worker
        if worker is not None:
            worker.close()
            self._worker = None
        first = self.workers_started == 0
        limit = self.start_timeout_s if first else self.health_timeout_s
        deadline = time.monotonic() + limit
        last = ""
        while True:
            try:
                worker, info = self._spawn(max(0.5, deadline - time.monotonic()))
                break
            except WorkerStartError as exc:
                last = str(exc)
                hopeless = first and exc.at_startup  # no GPU, no driver, no CuPy
            except WorkerTimeout:
                last, hopeless = f"no answer within {limit:g} s", False
            except WorkerDied as exc:
                last = f"the worker {exc.status}: {exc.stderr_tail[-400:]}"
                hopeless = first  # it cannot even start (an import error, a crash)
            if first and (hopeless or time.monotonic() + 0.25 >= deadline):
                raise ToolchainError(
                    f"cannot measure on GPU {self.device}: the worker could not start: {last}"
                )
            if time.monotonic() + 0.25 >= deadline:
                raise DeviceUnhealthy(
                    f"GPU {self.device} did not pass a health check within {limit:g} s "
                    f"(last: {last}); the run stops here, finished candidates are kept"
                )
            time.sleep(0.25)
        self._worker, self._info = worker, info
        self.workers_started += 1
        if self._fault_at is not None:
            self.recoveries_s.append(time.monotonic() - self._fault_at)
            log.info("worker replaced; healthy %.2f s after the fault", self.recoveries_s[-1])
            self._fault_at = None
        return worker

    def _retire(self, kill: bool) -> str:
        """Drop the current worker after a fault (kill its group, or reap it once it exits);
        returns the stderr it wrote during the failed request."""
        self._fault_at = time.monotonic()  # recovery is timed from here to a healthy worker
        worker, self._worker = self._worker, None
        tail = ""
        if worker is not None:
            if kill:
                worker.kill()
            else:
                worker.reap()
            tail = worker.stderr_tail()
            worker.close()
        return tail

    def _hang_limit(self, plan: SamplingPlan) -> float:
        """How long a request of this plan may take before the worker counts as hung."""
        return hang_timeout_s(
            plan, self._typical.seconds, self.settings.run_timeout_floor_s, self._typical.slowest
        )

    def _ask(
        self,
        worker: WorkerProcess,
        message: dict[str, Any] | int,
        limit: float,
        failed: Measurement,
        timed_out: str,
        doing: str,
    ) -> dict[str, Any] | Measurement:
        """``worker``'s answer to ``message`` (or to the request sent ahead with that id), or
        ``failed`` with the evidence when it hangs past ``limit`` (its process group killed:
        RUN_TIMEOUT, ``timed_out`` says what) or dies (``doing`` says when): the one home of
        how a request to a worker fails."""
        started = time.monotonic()
        try:
            if isinstance(message, int):
                return worker.receive(message, limit)
            return worker.request(message, limit)
        except WorkerTimeout:
            elapsed = time.monotonic() - started  # the kill's own time is not the request's
            tail = self._retire(kill=True)
            return dataclasses.replace(
                failed,
                outcome=Outcome.RUN_TIMEOUT,
                wall_s=elapsed,
                error=f"{timed_out}; the worker's process group was killed"
                + (f"; worker stderr: {tail}" if tail else ""),
            )
        except WorkerDied as exc:
            self._retire(kill=True)
            return dataclasses.replace(
                failed,
                wall_s=time.monotonic() - started,
                error=f"the worker {exc.status} while {doing}"
                + (f"; worker stderr: {exc.stderr_tail}" if exc.stderr_tail else ""),
            )

    def _set_up_problem(self, request: MeasureRequest, failed: Measurement) -> Measurement | None:
        """Set ``request``'s problem up in the live worker before it is measured there: the
        reference's outputs and the check's helper kernels, which CuPy compiles for a new
        shape, then count against :func:`setup_timeout_s`, not the hang limit (docs/design.md,
        measured facts). Once
        per problem and worker. None when set up (or when the setup reported an error: the
        measurement does the same work and reports it); else the failed measurement."""
        worker = self._ensure_worker()
        done = self._set_up.setdefault(worker, set())
        key = _set_up_key(request)
        if key in done:
            return None
        limit = setup_timeout_s(self._hang_limit(request.plan))
        sent = self._sent_ahead(worker, request)
        answer = self._ask(
            worker,
            measure_message(0, request, op="prepare") if sent is None else sent,
            limit,
            failed,
            f"setting up problem {request.problem} (inputs, reference outputs, module) took "
            f"over {limit:.0f} s",
            f"setting up problem {request.problem}",
        )
        if isinstance(answer, Measurement):
            return answer
        if answer.get("fatal"):
            self._retire(kill=False)
        elif answer.get("ok"):
            done.add(key)
        return None

    def restart(self) -> None:
        """Close the live worker; the next measurement runs in a fresh process."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    # --- measuring ----------------------------------------------------------------
    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        validate(plan)
        if plan.energy and not self._nvml_checked:
            from ctune.measure.nvml_energy import require_nvml

            require_nvml(self.device)
            self._nvml_checked = True
        key = candidate.key()
        if not build.outcome.is_ok:
            return Measurement(
                key,
                problem.name,
                build.outcome,
                l2_policy=plan.l2_policy,
                error=f"not measured: the build ended {build.outcome.value}",
            )
        request = MeasureRequest(spec.yaml_path, candidate, build, problem.name, plan)
        failed = Measurement(
            key, problem.name, Outcome.RUNTIME_FAULT, device=self._info, l2_policy=plan.l2_policy
        )
        self._ensure_worker()  # before the spares are asked: a new worker may be one of them
        asked = self._settle_spares(request)
        try:
            setup_failed = self._set_up_problem(request, failed)
        finally:
            self._spares_set_up(asked, request)
        if setup_failed is not None:
            return setup_failed
        worker = self._ensure_worker()
        limit = self._hang_limit(plan)
        started = time.monotonic()
        answer = self._ask(
            worker,
            measure_message(0, request),
            limit,
            failed,
            f"no result within {limit:.1f} s (hang limit)",
            "measuring",
        )
        if isinstance(answer, Measurement):
            return answer
        wall = time.monotonic() - started
        fatal = bool(answer.get("fatal"))
        if not answer.get("ok"):
            if fatal:
                self._retire(kill=False)
            kind, error = answer.get("kind"), str(answer.get("error", ""))
            if kind == "user":
                raise UserError(error)
            if kind == "toolchain":
                raise ToolchainError(error)
            raise HarnessError(f"the measurement worker failed on candidate {key}: {error}")
        measurement = dataclasses.replace(parse_measurement(answer), wall_s=wall)
        if fatal:
            tail = self._retire(kill=False)
            if tail:
                measurement = dataclasses.replace(
                    measurement, error=f"{measurement.error}; worker stderr: {tail}"
                )
        elif measurement.outcome.is_ok:
            self._typical.add(wall)
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
        """Each item once in each of ``processes`` fresh workers, order shuffled per process
        (interleaving, rule M11; seed None: 0), keyed by candidate key."""
        rng = random.Random(0 if seed is None else seed)
        results: dict[str, list[Measurement]] = {c.key(): [] for c, _ in items}
        self.prestart(processes)  # all start side by side, before any of them measures
        for _ in range(processes):
            order = list(items)
            rng.shuffle(order)
            if order:
                self._take_fresh_worker(spec, *order[0], problem, plan)
            for candidate, build in order:
                results[candidate.key()].append(self.measure(spec, candidate, build, problem, plan))
        return results

    def _take_fresh_worker(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> None:
        """Retire the live worker and start the next measurement in a fresh one, which
        sets up that measurement (``prepare``) unless it did so ahead. The retired worker
        is parked, idle, until :meth:`close` (see ``PARKED_MAX``); where that would park
        too many, the oldest one exits while the fresh one sets up, and is gone before
        anything is timed. A prepare that fails changes nothing: the measurement does the
        same work and reports what goes wrong."""
        if self._worker is not None:
            self._parked.append(self._worker)
            self._worker = None
        leaving = self._parked.pop(0) if len(self._parked) > PARKED_MAX else None
        if leaving is not None:
            leaving.begin_exit()
        try:
            request = MeasureRequest(spec.yaml_path, candidate, build, problem.name, plan)
            failed = Measurement(candidate.key(), problem.name, Outcome.RUNTIME_FAULT)
            try:
                self._set_up_problem(request, failed)  # a failure: the measurement says it
            except HarnessError:
                self._retire(kill=True)  # the measurement starts another
        finally:
            if leaving is not None:
                leaving.finish_exit()

    def close(self) -> None:
        """End every process (live, parked, spare), their exits side by side: this returns
        once each has answered its exit, and their ends are waited for in the background
        (:meth:`WorkerProcess.finish_exit`), each killed if it does not come in 5 s."""
        workers = [w for w in (self._worker, *self._parked) if w is not None]
        workers += [spare for spare, _ in self._spares]
        self._worker, self._parked, self._spares = None, [], []
        for worker in workers:
            worker.begin_exit()
        for worker in workers:
            worker.finish_exit(wait=False)

    def __enter__(self) -> WorkerMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def measure_in_fresh_processes(
    spec: KernelSpec,
    candidate: Candidate,
    build: Build,
    problem: Problem,
    plan: SamplingPlan,
    processes: int = 3,
    *,
    device: int = 0,
    settings: Settings | None = None,
    baseline_s: float | None = None,
    worker_argv: Sequence[str] | None = None,
) -> list[Measurement]:
    """One measurement in each of ``processes`` separate worker processes (the regression gate
    needs k >= 3 independent processes per side: the noise floor is per process)."""
    with WorkerMeasurer(
        device, settings, baseline_s=baseline_s, worker_argv=worker_argv
    ) as measurer:
        out = []
        for _ in range(processes):
            measurer.restart()
            out.append(measurer.measure(spec, candidate, build, problem, plan))
        return out


def remeasure(
    spec: KernelSpec,
    items: Sequence[tuple[Candidate, Build]],
    problem: Problem,
    plan: SamplingPlan,
    processes: int = 3,
    *,
    device: int = 0,
    settings: Settings | None = None,
    seed: int = 0,
    worker_argv: Sequence[str] | None = None,
) -> dict[str, list[Measurement]]:
    """:meth:`WorkerMeasurer.remeasure` with a measurer of its own."""
    with WorkerMeasurer(device, settings, worker_argv=worker_argv) as measurer:
        return measurer.remeasure(spec, items, problem, plan, processes, seed=seed)


__all__ = [
    "HarnessError",
    "LineReader",
    "WorkerDied",
    "WorkerMeasurer",
    "WorkerProcess",
    "WorkerStartError",
    "WorkerTimeout",
    "measure_in_fresh_processes",
    "remeasure",
    "worker_command",
]
