"""Ctrl-C and SIGTERM: one way to stop, and one line that says what was kept.

Every command ends on SIGINT or SIGTERM (what a CI runner sends when a job is cancelled)
with exit 130 and one line, ``interrupted: <what was kept>``. SIGTERM is turned into the
``KeyboardInterrupt`` that SIGINT raises, so one path serves both: the ``finally`` blocks
that stop compiles and GPU workers, and the search's stop after the candidate in flight.

A command that keeps something says so by raising :class:`Interrupted` with that text; a
plain ``KeyboardInterrupt`` means nothing was written. A section that must not stop half
way (an artifact written and committed) runs under :func:`deferred`: a signal that
arrives meanwhile takes effect when the section ends, and the caller says what it kept.

The signal lands in the main thread only (ctune's threads block it), is not lost in a
finalizer, and cannot change the exit of a command that has ended (docs/design.md).
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

#: the signals that stop a command: Ctrl-C, and a CI runner's cancel
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: what an interrupt keeps when the command does not say otherwise
NOTHING_WRITTEN = "nothing written"
#: how the one line an interrupt ends a command with starts (``cli/render.py`` draws it)
INTERRUPTED = "interrupted:"


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


def nothing_kept_yet() -> None:
    """A command, or a search within one, starts: nothing it kept is recorded yet (what
    an earlier one in this process kept is not this one's to report)."""
    _kept_so_far.clear()


def kept_by(exc: BaseException) -> str:
    """What an interrupt kept: its own text, else what the command recorded, else nothing."""
    if isinstance(exc, Interrupted):
        return exc.kept
    return _kept_so_far[-1] if _kept_so_far else NOTHING_WRITTEN


def kept_with(exc: BaseException, own: str) -> str:
    """What an interrupt kept (:func:`kept_by`: a commit made) and what the caller keeps
    itself (``own``: a search's journal), in one text: the last line loses neither."""
    other = kept_by(exc)
    if other == NOTHING_WRITTEN:
        return own
    return other if own == NOTHING_WRITTEN else f"{other}; {own}"


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


#: how long a Ctrl-C swallowed by a finalizer waits to be given back to the command
REDELIVERY_DELAY_S = 0.01


def _interrupt_main_soon() -> None:
    time.sleep(REDELIVERY_DELAY_S)
    _thread.interrupt_main()  # nothing where the signal is ignored: the command has ended


def _redeliver_lost_interrupts(
    previous: Callable[[sys.UnraisableHookArgs], object],
) -> Callable[[sys.UnraisableHookArgs], None]:
    """An unraisable-exception hook that gives a swallowed Ctrl-C back to the command.

    A ``KeyboardInterrupt`` raised while the garbage collector runs an object's ``__del__``
    (a git repository's, say) cannot propagate: Python prints it as "Exception ignored"
    and carries on, as if the command had never been interrupted. This hook signals the
    main thread again a moment later, from a thread of its own: signalled at once, the
    interrupt would land in the hook itself (and be lost the same way). The command meets
    it at its next step, or a section that defers signals holds it; should it land in a
    finalizer again, it comes back here. Any other exception goes to ``previous``."""

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if issubclass(unraisable.exc_type, KeyboardInterrupt):
            redeliver = threading.Thread(target=_interrupt_main_soon, name="ctune-redeliver")
            redeliver.daemon = True
            redeliver.start()
            return
        previous(unraisable)

    return hook


def terminate_as_interrupt_from_the_start() -> None:
    """The ``ctune`` program's first step (``ctune/__main__.py``), before the command tree
    is imported: SIGTERM raises ``KeyboardInterrupt`` as SIGINT does, so a stop that comes
    while ctune is still starting ends it the one way (exit 130 and its line), never by
    the signal itself. :func:`terminate_as_interrupt` holds the rule while a command runs."""
    if _in_main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` while the block runs, and a Ctrl-C that lands
    in a finalizer is not lost (:func:`_redeliver_lost_interrupts`); outside the main
    thread, where no signal handler can be set, nothing changes. It starts a command:
    nothing kept yet."""
    nothing_kept_yet()
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _redeliver_lost_interrupts(previous_hook)
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
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


def block_stop_signals_in_this_thread() -> None:
    """Block SIGINT and SIGTERM in the calling thread for the rest of its life. For the
    threads ctune starts (a pool's initializer, :func:`start_thread`): the kernel then
    hands a stop signal to the main thread, so a section of the main thread that blocks
    them (:func:`blocked`, :func:`deferred`) really holds them back until it ends, where a
    thread that took one would have had Python raise it in the main thread at once."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def start_thread(target: Callable[..., object], *args: object, name: str) -> threading.Thread:
    """``target(*args)`` in a daemon thread that never takes a stop signal: it is started
    with them blocked, and a thread keeps the mask of the thread that started it. A daemon
    thread never keeps the process from exiting once its command has ended."""
    with blocked():
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
    return thread


def settle_for_exit() -> None:
    """The command has ended and said how (its output, its exit code); the process only
    exits from here. A stop signal that came now would land in the interpreter's own
    clean-up, as a traceback from an object's ``__del__`` or a death by SIGINT after a
    clean 0, so SIGINT and SIGTERM are ignored until the process ends (ctune's threads
    are daemons and its compiles and workers already stopped: nothing is left to wait on).

    It also clears the mark CPython leaves when a ``KeyboardInterrupt`` passes out of code
    run by ``exec`` of a string (``dataclasses`` builds its methods that way): the
    interpreter counts that interrupt as unhandled even though the command caught it, and
    at exit kills itself with SIGINT instead of returning the command's exit code. Each
    ``exec`` of a string starts by clearing that mark."""
    if not _in_main_thread():
        return
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    exec("None")


class Held:
    """The stop signals :func:`deferred` held back while its block ran. A plain class, as
    the module is light: the program imports it before it can take a stop signal
    (``ctune/__main__.py``), and dataclasses would load inspect first."""

    def __init__(self) -> None:
        self.signals: list[int] = []

    @property
    def signalled(self) -> bool:
        return bool(self.signals)


@contextlib.contextmanager
def deferred(*, children_too: bool = True) -> Iterator[Held]:
    """Hold SIGINT and SIGTERM back while the block runs; after it, the caller checks
    ``held.signalled`` and stops (saying what the block finished). An exception from the
    block propagates as it is. Outside the main thread nothing is held.

    The signals are blocked as well as handled: a process the block starts (git) inherits
    the blocked mask, so the terminal's Ctrl-C, sent to ctune's whole process group, cannot
    reach it in the instant between its start and its leaving the group. ``children_too``
    False handles them only: a process the block starts in ctune's group (``git push``)
    still stops on the terminal's Ctrl-C, while ctune waits for it to end and learns how
    it ended (whether the push went through) before it stops."""
    held = Held()
    if not _in_main_thread():
        yield held
        return

    def hold(signum: int, frame: FrameType | None) -> None:
        held.signals.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in STOP_SIGNALS}
    try:
        with blocked() if children_too else contextlib.nullcontext():
            yield held  # when ``blocked`` ends, a signal held back runs ``hold``
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = [
    "INTERRUPTED",
    "NOTHING_WRITTEN",
    "STOP_SIGNALS",
    "Held",
    "Interrupted",
    "block_stop_signals_in_this_thread",
    "blocked",
    "deferred",
    "ignored",
    "keep",
    "kept_by",
    "kept_with",
    "nothing_kept_yet",
    "settle_for_exit",
    "start_thread",
    "terminate_as_interrupt",
    "terminate_as_interrupt_from_the_start",
]
