"""ctune's one rule for a file that one process at a time may write.

An exclusive ``flock`` (through filelock) on a lock file, taken without waiting longer
than the caller allows: a second process is refused, never queued behind a writer that
may run for hours. The kernel drops a ``flock`` when its holder's file is closed, so a
killed holder never leaves the lock held, and nothing has to be cleared by hand. The
lock file itself stays in place (removing it would let two processes hold locks on two
files of one name). The registry's writer lock (``registry/locks.py``) and a search's
journal (``search/journal.py``) are held this way.
"""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock, Timeout


def take(path: Path, timeout_s: float) -> FileLock | None:
    """The exclusive lock on ``path`` (created if missing), waiting at most ``timeout_s``
    (0: not at all); None when another process keeps it. The caller releases it
    (``release()``), or its process ends. Not tied to the thread that took it."""
    lock = FileLock(path, timeout=timeout_s, mode=0o644, thread_local=False)
    try:
        lock.acquire(poll_interval=0.02)
    except Timeout:
        return None
    return lock


__all__ = ["take"]
