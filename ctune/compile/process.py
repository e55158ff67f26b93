"""One nvcc process, started and ended by one rule.

Every nvcc ctune runs to compile (a build, the ``-M`` dependency run, the PTX rerun,
``ctune init``'s probe) or to probe a toolchain goes through :func:`run_nvcc`, so each
one gets the same argv check, process group, timeout, private TMPDIR and cleaned
environment, and none outlives the command (:func:`runs_end_with_the_command`). The
rules: docs/design.md, "The build cache".
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctune.errors import UserError
from ctune.interrupts import block_stop_signals_in_this_thread, blocked
from ctune.quoting import CommandLineError, check_argv, value_refusal
from ctune.writes import is_disk_full

log = logging.getLogger(__name__)

#: environment variables that would inject flags behind ctune's back (rule I5)
SCRUBBED_ENV = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")
#: what a private temporary folder's name starts with (a killed ctune may leave one)
SCRATCH_PREFIX = ".nvcc-tmp-"


@dataclass(frozen=True)
class NvccRun:
    """How one nvcc run ended: its exit status (None: killed at the timeout) and output."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    #: killed for printing more than its ``max_output_bytes`` (its output cut there)
    overflowed: bool = False

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


class _Started:
    """One run in a :class:`LiveGroups`: its process, once started."""

    proc: subprocess.Popen[bytes] | None = None


class LiveGroups:
    """The nvcc runs under way, so that another thread can end them all at once (a compiler
    pool stopping on Ctrl-C, the command line ending). Thread-safe. A run is in the set from
    before its temporary folder is made until nvcc is reaped and that folder removed."""

    def __init__(self) -> None:
        self._runs: set[_Started] = set()
        self._changed = threading.Condition()
        self._ending = False

    @property
    def is_ending(self) -> bool:
        """Inside :meth:`ending`: a run that starts now is ended at once."""
        return self._ending

    @contextlib.contextmanager
    def ending(self) -> Iterator[None]:
        """Every run under way is killed as the block starts, and every run that starts
        while it runs (a thread going on to its next step) is killed at once."""
        self._ending = True
        try:
            self.kill_all()
            yield
        finally:
            self._ending = False

    def add(self, run: _Started) -> None:
        with self._changed:
            self._runs.add(run)

    def discard(self, run: _Started) -> None:
        with self._changed:
            self._runs.discard(run)
            self._changed.notify_all()

    def kill_all(self) -> None:
        """SIGKILL every group under way; the threads waiting on them reap them."""
        with self._changed:
            procs = [run.proc for run in self._runs if run.proc is not None]
        for proc in procs:
            kill_group(proc)

    def wait_empty(self, timeout_s: float) -> bool:
        """Wait until no run is under way (False: some still were after ``timeout_s``)."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._runs, timeout_s)


#: the runs of a pool's thread also go to its pool's set (:func:`pool_thread_start`)
_THREAD = threading.local()


def pool_thread_start(live: LiveGroups) -> Callable[[], None]:
    """The initializer of a compiler pool's threads: every nvcc run the thread starts (a
    build, its ``-M``, the PTX rerun) joins ``live``, so that the pool's owner can end them
    all (a pool that stops waits for its threads, and they for their runs). The thread
    takes no stop signal: those are the main thread's."""

    def start() -> None:
        block_stop_signals_in_this_thread()
        _THREAD.live = live

    return start


#: every nvcc run under way in this process, whichever thread started it
_EVERY_RUN = LiveGroups()


class RunsEnded(Exception):
    """An nvcc run a thread started while its set was ending (its command, its pool)."""


@contextlib.contextmanager
def runs_end_with_the_command(timeout_s: float = 10.0) -> Iterator[None]:
    """When the block ends, however it ends, every nvcc run still under way (a thread's
    compile ahead, a fingerprint's ``-M``) is killed and reaped, and its temporary folder
    removed, before the caller goes on: nothing ctune started outlives the command."""
    try:
        yield
    finally:
        with _EVERY_RUN.ending():
            if not _EVERY_RUN.wait_empty(timeout_s):
                log.warning("nvcc runs were still ending after %g s", timeout_s)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process's whole group (nvcc spawns cicc and ptxas); gone already is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _limit_memory(pid: int, limit_bytes: int) -> None:
    """Cap the address space of a started nvcc; cicc and ptxas inherit it when spawned.

    Set from the parent (prlimit) rather than in a preexec_fn, which is unsafe in a
    process with threads: compiles are started from a thread pool.
    """
    if limit_bytes > 0:
        with contextlib.suppress(OSError):  # gone already (ProcessLookupError) included
            resource.prlimit(pid, resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def _lower_priority(pid: int, niceness: int) -> None:
    """Lower a started nvcc's CPU priority by ``niceness`` (cicc and ptxas inherit it)."""
    if niceness > 0:
        with contextlib.suppress(OSError):  # gone already, or not ours to change
            now = os.getpriority(os.PRIO_PROCESS, pid)
            os.setpriority(os.PRIO_PROCESS, pid, min(19, now + niceness))


@contextlib.contextmanager
def scratch_folder(parent: Path | None, what: str) -> Iterator[Path]:
    """A fresh folder under ``parent`` (None: the system's temporary folder), removed when
    the block ends. nvcc writes its TMPDIR into its shell lines, so the path must pass the
    rule for quoted items."""
    try:
        if parent is not None:
            parent.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=parent)).absolute()
    except OSError as exc:
        raise _no_scratch(exc, parent) from None
    try:
        why = value_refusal(str(folder))
        if why is not None:
            raise CommandLineError(
                f"{what}: the temporary folder {str(folder)!r} {why}; nothing was run "
                "(set CTUNE_CACHE_DIR, or TMPDIR, to a path without it: docs/security.md)"
            )
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _no_scratch(exc: OSError, parent: Path | None) -> OSError | UserError:
    """Why no temporary folder could be made in ``parent`` (ctune's cache folder, mostly),
    naming that folder, not the kernel: a full disk or quota stays an OSError (exit 3,
    ``ctune.cli.main``); anything else is the folder's (a cache_dir that is a file, one
    ctune cannot write: exit 2)."""
    where = parent if parent is not None else Path(tempfile.gettempdir())
    if is_disk_full(exc):
        exc.filename = exc.filename or str(where)
        return exc
    return UserError(
        f"{where}: nvcc's temporary folder cannot be made there ({exc.strerror}: "
        f"{exc.filename or where}); set CTUNE_CACHE_DIR (cache_dir) to a folder ctune can write"
    )


def nvcc_env(tmpdir: Path) -> dict[str, str]:
    """ctune's environment for nvcc: the injection variables dropped, TMPDIR its own."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["TMPDIR"] = str(tmpdir)
    return env


def run_nvcc(
    argv: Sequence[str],
    *,
    what: str,
    timeout_s: float,
    scratch: Path | None = None,
    cwd: Path | None = None,
    merge_output: bool = False,
    memory_bytes: int = 0,
    niceness: int = 0,
    live: LiveGroups | None = None,
    max_output_bytes: int = 0,
) -> NvccRun:
    """Run nvcc by the rule of this module and wait for it (or its timeout).

    ``what`` names the run in an error (``"nvcc for gemm"``); ``scratch``: where its private
    TMPDIR is made (ctune's cache folder; None: the system's temporary folder);
    ``merge_output``: stderr into stdout, as a log; ``live``: a set the run joins while
    it is under way (a compiler pool's thread joins its pool's anyway);
    ``max_output_bytes``: the most of each stream read (0: all), the group killed past it
    (a probe of a program that is no nvcc must not fill memory). Raises
    CommandLineError for an argv the rule refuses, OSError when nvcc cannot be started and
    RunsEnded when its set was ending; an interrupt while it runs ends the group and
    propagates.
    """
    argv = list(argv)
    check_argv(argv, what)
    live = live if live is not None else getattr(_THREAD, "live", None)
    groups = [_EVERY_RUN] if live is None else [_EVERY_RUN, live]
    run = _Started()
    for group in groups:
        group.add(run)
    try:
        with scratch_folder(scratch, what) as tmpdir:
            with blocked():  # started with the stop signals blocked: they are ctune's
                run.proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=nvcc_env(tmpdir),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT if merge_output else subprocess.PIPE,
                    start_new_session=True,  # its own process group, killed as a whole
                )
            limits = _Limits(timeout_s, memory_bytes, niceness, max_output_bytes)
            return _wait(run.proc, groups, limits)
    finally:  # after the temporary folder is gone: a waiter finds everything ended
        for group in groups:
            group.discard(run)


@dataclass(frozen=True)
class _Limits:
    """What a run may take: seconds, address space, CPU priority and output (0: no limit)."""

    timeout_s: float
    memory_bytes: int = 0
    niceness: int = 0
    output_bytes: int = 0


def _wait(proc: subprocess.Popen[bytes], groups: Sequence[LiveGroups], limits: _Limits) -> NvccRun:
    """Limit a started nvcc, wait for it, and end its group on every way out."""
    try:
        if any(group.is_ending for group in groups):  # nobody waits for this run
            raise RunsEnded("its command or its pool was ending")
        _limit_memory(proc.pid, limits.memory_bytes)
        _lower_priority(proc.pid, limits.niceness)
        if limits.output_bytes > 0:
            return _read_capped(proc, limits.timeout_s, limits.output_bytes)
        try:
            out, err = proc.communicate(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, err = proc.communicate()
            return NvccRun(None, out or b"", err or b"")
        return NvccRun(proc.returncode, out or b"", err or b"")
    except BaseException:  # Ctrl-C, SIGTERM, anything: no nvcc is left running
        kill_group(proc)  # before it is reaped: the group's id is still nvcc's
        with blocked(), contextlib.suppress(Exception):  # a second Ctrl-C waits a moment
            proc.communicate()
        raise


def _read_capped(proc: subprocess.Popen[bytes], timeout_s: float, cap: int) -> NvccRun:
    """Read a run's streams until they end, at most ``cap`` bytes of each: past the cap or
    the timeout its group is killed (what was read is kept), so memory stays bounded."""
    deadline = time.monotonic() + timeout_s
    pipes = [pipe for pipe in (proc.stdout, proc.stderr) if pipe is not None]
    read = {pipe.fileno(): bytearray() for pipe in pipes}
    overflowed = False
    with selectors.DefaultSelector() as streams:
        for pipe in pipes:
            streams.register(pipe, selectors.EVENT_READ)
        while streams.get_map() and not overflowed and time.monotonic() < deadline:
            for key, _ in streams.select(deadline - time.monotonic()):
                chunk = os.read(key.fd, 64 * 1024)
                if not chunk:
                    streams.unregister(key.fileobj)
                got = read[key.fd]
                overflowed = overflowed or len(got) + len(chunk) > cap
                got += chunk[: cap - len(got)]
        unfinished = bool(streams.get_map())
    timed_out = not overflowed and (unfinished or not _ended(proc, deadline))
    if overflowed or timed_out:
        kill_group(proc)  # not reaped yet: the group's id is still its
    proc.wait()
    out, err = (bytes(read[pipe.fileno()]) if pipe else b"" for pipe in (proc.stdout, proc.stderr))
    for pipe in pipes:
        pipe.close()
    return NvccRun(None if timed_out else proc.returncode, out, err, overflowed=overflowed)


def _ended(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    """Whether the run, its streams closed, ends by ``deadline``."""
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        return False
    return True


__all__ = [
    "SCRUBBED_ENV",
    "LiveGroups",
    "NvccRun",
    "RunsEnded",
    "kill_group",
    "nvcc_env",
    "pool_thread_start",
    "run_nvcc",
    "runs_end_with_the_command",
    "scratch_folder",
]
