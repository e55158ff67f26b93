"""The measurement worker: ``python -m ctune.measure.worker --device N``.

One process per GPU, kept alive between candidates because a start is costly
(``measure/start_ahead.py``), and replaced after a sticky fault (the CUDA context is dead
for the rest of the process) or a hang (the parent kills its process group). It speaks
newline-delimited JSON on stdin/stdout, one response per request (docs/design.md, "The
worker protocol"); everything else it or user code prints goes to stderr. The protocol
helpers at the top are pure; CuPy is imported only in :class:`WorkerService`.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import CtuneError, ToolchainError, UserError
from ctune.measure import SamplingPlan
from ctune.measure.plan import plan_from_json, plan_to_json
from ctune.measure.vendor import VendorError, VendorLaunch, is_vendor, load_vendor
from ctune.records import (
    Build,
    Candidate,
    Measurement,
    Outcome,
    build_from_json,
    measurement_from_json,
    to_json,
)

if TYPE_CHECKING:
    from ctune.spec import KernelSpec, Problem

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
EXIT_FATAL = 3  # exited after reporting a sticky fault
EXIT_STARTUP = 2
EXIT_ORPHANED = 4
REFERENCE_CACHE_BYTES = 4 * 1024**3
ERROR_TAIL_CHARS = 4000


# --- protocol (pure) ------------------------------------------------------------------


def encode(message: Mapping[str, Any]) -> bytes:
    """One JSON object on one line (NaN and Infinity allowed: rel_l2 can be inf)."""
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode(line: bytes | str) -> dict[str, Any]:
    text = line.decode() if isinstance(line, bytes) else line
    message = json.loads(text)
    if not isinstance(message, dict) or not isinstance(message.get("id"), int):
        raise ValueError(f"not a protocol message: {text[:200]!r}")
    return message


@dataclass(frozen=True)
class MeasureRequest:
    """What to measure (or, for ``prepare``, set up); ``build`` is None only in a set-up
    sent before any build exists."""

    spec_path: Path
    candidate: Candidate
    build: Build | None
    problem: str
    plan: SamplingPlan


def measure_message(
    request_id: int, request: MeasureRequest, op: str = "measure"
) -> dict[str, Any]:
    """A measure request, or (``op="prepare"``) the same fields to set it up ahead."""
    return {
        "id": request_id,
        "op": op,
        "protocol": PROTOCOL_VERSION,
        "spec": str(request.spec_path),
        "candidate": request.candidate.to_json(),
        "build": None if request.build is None else to_json(request.build),
        "problem": request.problem,
        "plan": plan_to_json(request.plan),
    }


def parse_measure(message: Mapping[str, Any]) -> MeasureRequest:
    if message.get("protocol") != PROTOCOL_VERSION:
        raise ValueError(
            f"protocol {message.get('protocol')!r}; this worker speaks {PROTOCOL_VERSION}"
        )
    return MeasureRequest(
        spec_path=Path(message["spec"]),
        candidate=Candidate.from_json(message["candidate"]),
        build=None if message.get("build") is None else build_from_json(message["build"]),
        problem=str(message["problem"]),
        plan=plan_from_json(dict(message["plan"])),
    )


def measurement_response(request_id: int, measurement: Measurement, fatal: bool) -> dict[str, Any]:
    return {"id": request_id, "ok": True, "measurement": to_json(measurement), "fatal": fatal}


def parse_measurement(message: Mapping[str, Any]) -> Measurement:
    return measurement_from_json(message["measurement"])


def error_response(request_id: int, kind: str, error: str, fatal: bool) -> dict[str, Any]:
    return {
        "id": request_id,
        "ok": False,
        "kind": kind,
        "error": error[-ERROR_TAIL_CHARS:],
        "fatal": fatal,
    }


def evidence(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[-ERROR_TAIL_CHARS:]


# --- the service (GPU) -------------------------------------------------------------------


class ReferenceCache:
    """Reference outputs per (spec, problem, seed), least recently used evicted by bytes."""

    def __init__(self, max_bytes: int = REFERENCE_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: collections.OrderedDict[tuple[Any, ...], dict[str, Any]] = (
            collections.OrderedDict()
        )

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        return None

    def put(self, key: tuple[Any, ...], value: dict[str, Any]) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > 1 and self.nbytes > self.max_bytes:
            self._items.popitem(last=False)

    @property
    def nbytes(self) -> int:
        return sum(int(getattr(a, "nbytes", 0)) for v in self._items.values() for a in v.values())

    def __len__(self) -> int:
        return len(self._items)


class WorkerService:
    """Owns the CUDA context of one worker process."""

    def __init__(self, device: int) -> None:
        try:
            import cupy
        except ImportError as exc:
            raise ToolchainError(
                f"CuPy is not installed ({exc}); pip install cupy-cuda13x"
            ) from None
        from ctune.measure.cupy_events import EventTimer, Helpers
        from ctune.measure.device import Telemetry, probe_device_info
        from ctune.measure.start_ahead import context_ahead, import_ahead

        self.cp = cupy
        self.device = device
        count = cupy.cuda.runtime.getDeviceCount()
        if device >= count:
            raise ToolchainError(f"GPU {device} requested; CuPy sees {count}")
        try:
            pci = str(cupy.cuda.runtime.deviceGetPCIBusId(device))
        except Exception:
            pci = None
        self.telemetry = Telemetry.open(pci, device)
        before = self.telemetry.compute_pids() if self.telemetry else None
        with context_ahead(device):  # the context made beside the imports the set-up needs
            import_ahead()
        cupy.cuda.Device(device).use()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.stream.use()
        cupy.zeros(1, dtype=cupy.uint8)  # the memory pool up now, not inside a request
        self.stream.synchronize()
        after = self.telemetry.compute_pids() if self.telemetry else None
        own = {os.getpid()}
        if before is not None and after is not None and len(after - before) == 1:
            own |= after - before  # our pid as NVML sees it (it differs inside PID namespaces)
        self.own_pids = own
        self.info = probe_device_info(cupy, device, self.telemetry)
        self.smem_optin = int(
            cupy.cuda.runtime.deviceGetAttribute(
                cupy.cuda.runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin, device
            )
        )
        self.helpers = Helpers(cupy)
        self.timer = EventTimer(cupy, self.stream, self.helpers, self.info.l2_bytes, self.telemetry)
        self._specs: dict[str, tuple[int, KernelSpec]] = {}
        self._references = ReferenceCache()
        self._reference_funcs: dict[str, Any] = {}
        self._verify_funcs: dict[str, Any] = {}
        self._loaded: tuple[str, Any] | None = None

    # --- requests ----------------------------------------------------------------
    def handle(self, message: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        request_id = int(message["id"])
        op = message.get("op")
        try:
            if op == "measure":
                measurement, fatal = self.measure(parse_measure(message))
                return measurement_response(request_id, measurement, fatal), fatal
            if op == "prepare":
                self.prepare(parse_measure(message))
                return {"id": request_id, "ok": True}, False
            if op == "health":
                detail = self.health()
                healthy = detail is None
                return (
                    {
                        "id": request_id,
                        "ok": True,
                        "healthy": healthy,
                        "detail": detail or "",
                        "fatal": not healthy,
                    },
                    not healthy,
                )
            if op == "info":
                return {"id": request_id, "ok": True, "device": to_json(self.info)}, False
            if op == "exit":
                return {"id": request_id, "ok": True}, False
            return error_response(request_id, "internal", f"unknown op {op!r}", False), False
        except UserError as exc:
            return error_response(request_id, "user", str(exc), False), False
        except ToolchainError as exc:
            return error_response(request_id, "toolchain", str(exc), False), False
        except Exception as exc:
            # a harness bug, or a fault we could not classify: report it loudly, and
            # exit, because the context's state is unknown
            text = "".join(traceback.format_exception(exc))
            log.error("request %s failed: %s", request_id, text)
            return error_response(request_id, "internal", text, True), True

    def health(self) -> str | None:
        try:
            return self.helpers.health(self.stream)
        except Exception as exc:
            return evidence(exc)

    def _spec(self, path: Path) -> KernelSpec:
        from ctune.spec import load_spec

        key = str(path)
        stamp = path.stat().st_mtime_ns
        cached = self._specs.get(key)
        if cached is None or cached[0] != stamp:
            self._specs[key] = (stamp, load_spec(path))
            self._reference_funcs.pop(key, None)
            self._verify_funcs.pop(key, None)
        return self._specs[key][1]

    def _reference(self, spec: KernelSpec, problem: Problem) -> Any:
        from ctune.measure.correctness import reference_outputs
        from ctune.spec import GivenData

        key = str(spec.yaml_path)
        if key not in self._reference_funcs:
            self._reference_funcs[key] = spec.reference()
        func = self._reference_funcs[key]
        stamp = spec.reference_path.stat().st_mtime_ns
        # given data files (and generators) are inputs too: a changed one is new references
        given = tuple(
            a.init.path.stat().st_mtime_ns for a in spec.args if isinstance(a.init, GivenData)
        )

        def reference(seed: int, buffers: Any) -> dict[str, Any]:
            cache_key = (spec.spec_sha256, stamp, given, problem.name, seed)
            found = self._references.get(cache_key)
            if found is None:
                found = reference_outputs(self.cp, spec, func, problem, buffers)
                self._references.put(cache_key, found)
            return found

        return reference

    def _verify(self, spec: KernelSpec) -> Any:
        """The spec's verify function (None without one), imported once per spec like the
        reference: what importing it raises is a SpecError, the spec's problem."""
        key = str(spec.yaml_path)
        if key not in self._verify_funcs:
            self._verify_funcs[key] = spec.verify()
        return self._verify_funcs[key]

    def _load(
        self, spec: KernelSpec, request: MeasureRequest, build: Build, problem: Problem
    ) -> Any:
        from ctune.measure.launch import load_candidate

        if is_vendor(request.candidate):
            key = f"vendor|{problem.name}"
            if self._loaded is None or self._loaded[0] != key:
                self._loaded = (key, load_vendor(self.cp, spec, dict(problem.dims)))
            return self._loaded[1]
        path = build.binary_path
        if not path or not Path(path).is_file():
            raise UserError(f"build {build.build_key or '?'} has no binary at {path}")
        key = f"{path}|{problem.name}|{request.candidate.key()}"
        if self._loaded is None or self._loaded[0] != key:
            self._loaded = None
            launch = load_candidate(
                self.cp,
                spec,
                request.candidate.as_dict(),
                problem,
                path,
                self.smem_optin,
                symbol=build.entry_symbol or None,
            )
            self._loaded = (key, launch)
        return self._loaded[1]

    def prepare(self, request: MeasureRequest) -> None:
        """Set up what measuring ``request`` first needs in this process, timing nothing:
        the spec, the reference outputs of the check's seeds (cached), the check's kernels,
        the module (where ``request`` has a build) and, for a cold-L2 plan, the flush
        buffer. :meth:`measure` then finds them ready. (The summary's statistics import
        nothing: ``ctune/evidence/stats.py``.)"""
        from ctune.measure.arrays import make_buffers
        from ctune.measure.correctness import warm_checks
        from ctune.measure.plan import check_seeds

        spec = self._spec(request.spec_path)
        problem = spec.problem(request.problem)
        runtime = spec.runtime_values(request.candidate)
        if request.plan.check:
            reference = self._reference(spec, problem)
            self._verify(spec)  # a verify file that does not import is said here, once
            for seed in check_seeds(problem.name):
                buffers = make_buffers(self.cp, spec, problem, seed, runtime)
                expected = reference(seed, buffers)
            warm_checks(self.cp, spec, problem, buffers, expected)
        if request.build is not None and request.build.outcome.is_ok:
            # a module that does not load is the candidate's failure, not the problem's: the
            # measurement loads it again and reports it (a launch error, a fault), and the
            # worker stays up for the problem's other candidates
            try:
                self._load(spec, request, request.build, problem)
            except CtuneError:
                raise  # a missing binary, a bad spec: the user's, said now
            except Exception:
                log.debug("prepare: %s did not load; its measurement reports it", request.build)
        if request.plan.l2_policy == "cold":
            self.timer.flush_cost_ms()  # allocates and first writes the flush buffer
        self.stream.synchronize()

    def measure(self, request: MeasureRequest) -> tuple[Measurement, bool]:
        from ctune.measure.device import classify_exception
        from ctune.spec import LaunchConfigError

        started = time.perf_counter()
        spec = self._spec(request.spec_path)
        problem = spec.problem(request.problem)
        base = Measurement(
            candidate_key=request.candidate.key(),
            problem=problem.name,
            outcome=Outcome.OK,
            device=self.info,
            l2_policy=request.plan.l2_policy,
        )
        build = request.build
        if build is None:
            raise ValueError("a measure request needs a build (only prepare goes without)")
        if not build.outcome.is_ok:
            return dataclasses.replace(
                base, outcome=build.outcome, error="not measured: the build failed"
            ), False
        try:
            measurement = self._measure(spec, problem, request, build, base)
            return dataclasses.replace(measurement, wall_s=time.perf_counter() - started), False
        except CtuneError:
            raise
        except (LaunchConfigError, VendorError) as exc:
            return self._failed(base, Outcome.LAUNCH_ERROR, str(exc), False, started)
        except Exception as exc:
            fault = classify_exception(exc)
            if fault is None:
                raise
            sticky = fault.sticky or not self._context_alive()
            outcome = Outcome.RUNTIME_FAULT if sticky else fault.outcome
            return self._failed(base, outcome, evidence(exc), sticky, started)

    def _failed(
        self, base: Measurement, outcome: Outcome, error: str, sticky: bool, started: float
    ) -> tuple[Measurement, bool]:
        self._loaded = None
        if not sticky:
            try:
                self.cp.get_default_memory_pool().free_all_blocks()
            except Exception:
                sticky = True
        m = dataclasses.replace(
            base, outcome=outcome, error=error, wall_s=time.perf_counter() - started
        )
        return m, sticky

    def _context_alive(self) -> bool:
        """After a 'non-sticky' error: does the context still work? (else treat as sticky)"""
        try:
            self.stream.synchronize()
            self.cp.cuda.runtime.deviceSynchronize()
            probe = self.cp.ones(16, dtype=self.cp.float32)
            return float(probe.sum()) == 16.0
        except Exception:
            return False

    def _measure(
        self,
        spec: KernelSpec,
        problem: Problem,
        request: MeasureRequest,
        build: Build,
        base: Measurement,
    ) -> Measurement:
        """One candidate end to end in the worker (load, launch check, correctness, timing, energy),
        each step's failure mapped to its outcome; one function so the mapping is visible."""
        from ctune.evidence.stats import summarize
        from ctune.measure.arrays import make_buffers
        from ctune.measure.correctness import run_checks
        from ctune.measure.plan import check_seeds, too_many_excluded

        plan = request.plan
        cp, stream = self.cp, self.stream
        launch = self._load(spec, request, build, problem)
        # runtime genes the spec passes as scalar arguments (no rebuild for them)
        runtime = spec.runtime_values(request.candidate)
        seeds = check_seeds(problem.name)
        buffers = make_buffers(cp, spec, problem, seeds[0], runtime)
        inout = buffers.names("inout")
        saved = buffers.snapshot(cp, inout) if inout else {}

        def restore() -> None:
            buffers.restore(cp, saved)

        go = launch.bind(buffers, stream)
        # a search's candidate that may be pruned is screened before its correctness check:
        # one it prunes is never reported or pinned, so the check would buy nothing
        screened = (
            self.timer.screen(go, plan, restore if saved else None)
            if plan.prune_above_ms is not None
            else None
        )
        rel_l2 = max_abs = None
        if plan.check and not (screened is not None and screened.pruned):

            def run(check_buffers: Any) -> None:
                launch.bind(check_buffers, stream)()
                if isinstance(launch, VendorLaunch):
                    launch.publish(check_buffers, stream)
                stream.synchronize()

            reference = self._reference(spec, problem)
            verify = self._verify(spec)
            report = run_checks(cp, spec, problem, run, reference, seeds, runtime, verify)
            rel_l2, max_abs = report.rel_l2, report.max_abs
            if not report.outcome.is_ok:
                return dataclasses.replace(
                    base,
                    outcome=report.outcome,
                    rel_l2_error=rel_l2,
                    max_abs_error=max_abs,
                    error=report.error,
                )
        timing = self.timer.measure(go, plan, restore if saved else None, screened)
        energy = None
        if plan.energy:
            if self.telemetry is None:
                raise ToolchainError("energy was asked for, but NVML is unavailable in the worker")
            from ctune.measure.nvml_energy import measure_energy

            energy = measure_energy(
                cp,
                stream,
                go,
                self.telemetry.handle,
                plan.energy_window_s,
                timing.warmup.kernel_ms,
                restore if saved else None,
            )
        outcome, error, summary = Outcome.OK, "", None
        if too_many_excluded(timing.excluded, timing.total):
            outcome = Outcome.INCONCLUSIVE
            error = (
                f"{timing.excluded} of {timing.total} samples were taken under clock slowdown "
                f"reasons and excluded (more than 10%): {timing.note}"
            )
        elif timing.samples_ms:
            summary = summarize(timing.samples_ms)
        telemetry = self.telemetry
        return dataclasses.replace(
            base,
            outcome=outcome,
            samples_ms=timing.samples_ms,
            summary=summary,
            n_warmup=timing.warmup.launches,
            excluded_samples=timing.excluded,
            sm_clock_mhz=timing.sm_clock_mhz,
            throttle_reasons=timing.reasons,
            sw_power_capped=timing.sw_power_capped,
            temperature_c=telemetry.temperature_c() if telemetry else None,
            energy_j=energy.energy_j if energy else None,
            avg_power_w=energy.avg_power_w if energy else None,
            energy_window_s=energy.window_s if energy else None,
            energy_launches=energy.launches if energy else None,
            energy_method=energy.method if energy else "",
            rel_l2_error=rel_l2,
            max_abs_error=max_abs,
            other_processes=telemetry.other_processes(self.own_pids) if telemetry else 0,
            error=error,
            l2_flush_bytes=timing.flush_bytes,
            sampling_note=timing.note,
            timing_method=timing.method,
            launches_per_sample=timing.launches_per_sample,
            pruned=timing.pruned,
        )


# --- process entry ----------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _watch_parent(parent: int) -> None:
    """Exit when the parent is gone (stdin EOF is not seen while a kernel spins)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(EXIT_ORPHANED)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctune.measure.worker")
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args(argv)
    # the protocol owns the real stdout; anything else printing to fd 1 lands on stderr
    proto = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="[ctune worker %(process)d] %(message)s"
    )
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()

    def send(message: Mapping[str, Any]) -> None:
        _write_all(proto, encode(message))

    try:
        service = WorkerService(args.device)
    except BaseException as exc:
        send({"id": 0, "ok": False, "ready": False, "error": evidence(exc)})
        return EXIT_STARTUP
    send({"id": 0, "ok": True, "ready": True, "pid": os.getpid(), "device": to_json(service.info)})
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return 0
        try:
            message = decode(line)
        except ValueError as exc:
            send(error_response(-1, "internal", f"bad request: {exc}", False))
            continue
        response, fatal = service.handle(message)
        send(response)
        if fatal:
            sys.stderr.flush()
            os._exit(EXIT_FATAL)  # skip CuPy's teardown on a dead context
        if message.get("op") == "exit":
            # the answer is written (unbuffered); skip CuPy's and Python's teardown
            with contextlib.suppress(Exception):
                service.cp.cuda.runtime.deviceSynchronize()
            sys.stderr.flush()
            os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
