"""Ctrl-C and SIGTERM: one way to stop, and one line that says what was kept.

Every command ends on SIGINT or SIGTERM (what a CI runner sends when a job is cancelled)
with exit 130 and one line, ``interrupted: <what was kept>``. SIGTERM is turned into the
``KeyboardInterrupt`` that SIGINT raises, so one path serves both: the ``finally`` blocks
that stop compiles and GPU workers, and the search's stop after the candidate in flight.

A command that keeps something says so by raising :class:`Interrupted` with that text; a
plain ``KeyboardInterrupt`` means nothing was written. A section that must not stop half
way (an artifact written and committed) runs under :func:`deferred`: a signal that
arrives meanwhile takes effect when the section ends, and the caller says what it kept.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType

#: the signals that stop a command: Ctrl-C, and a CI runner's cancel
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: what an interrupt keeps when the command does not say otherwise
NOTHING_WRITTEN = "nothing written"


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C (or SIGTERM) that a command caught to say what it kept (``kept``)."""

    def __init__(self, kept: str) -> None:
        super().__init__(kept)
        self.kept = kept


#: what the running command has kept so far (:func:`keep`), for a signal that comes after
_kept_so_far: list[str] = []


def keep(kept: str) -> None:
    """Record that the command has now kept something (a commit made): a signal that comes
    after it, before the command can say so itself, still reports it."""
    _kept_so_far[:] = [kept]


def kept_by(exc: BaseException) -> str:
    """What an interrupt kept: its own text, else what the command recorded, else nothing."""
    if isinstance(exc, Interrupted):
        return exc.kept
    return _kept_so_far[-1] if _kept_so_far else NOTHING_WRITTEN


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` while the block runs (outside the main thread,
    where no signal handler can be set, nothing changes). It starts a command: nothing
    kept yet."""
    _kept_so_far.clear()
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored while the block runs (main thread only): a command that
    is already stopping says so and exits 130, however many more Ctrl-Cs come meanwhile."""
    if not _in_main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def blocked() -> Iterator[None]:
    """SIGINT and SIGTERM blocked in this thread while the block runs. A process started
    in the block (nvcc, a measuring worker) inherits them blocked: the terminal's Ctrl-C,
    sent to ctune's whole process group, cannot kill it in the instant before it leaves
    that group (ctune stops its processes itself, with SIGKILL). A stop signal that
    arrives meanwhile is delivered when the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@dataclass
class Held:
    """The stop signals :func:`deferred` held back while its block ran."""

    signals: list[int] = field(default_factory=list)

    @property
    def signalled(self) -> bool:
        return bool(self.signals)


@contextlib.contextmanager
def deferred() -> Iterator[Held]:
    """Hold SIGINT and SIGTERM back while the block runs; after it, the caller checks
    ``held.signalled`` and stops (saying what the block finished). An exception from the
    block propagates as it is. Outside the main thread nothing is held.

    The signals are blocked as well as handled: a process the block starts (git) inherits
    the blocked mask, so the terminal's Ctrl-C, sent to ctune's whole process group, cannot
    reach it in the instant between its start and its leaving the group."""
    held = Held()
    if not _in_main_thread():
        yield held
        return

    def hold(signum: int, frame: FrameType | None) -> None:
        held.signals.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in STOP_SIGNALS}
    try:
        with blocked():  # when it ends, a signal held back runs ``hold``
            yield held
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = [
    "NOTHING_WRITTEN",
    "STOP_SIGNALS",
    "Held",
    "Interrupted",
    "blocked",
    "deferred",
    "ignored",
    "keep",
    "kept_by",
    "terminate_as_interrupt",
]
