"""Writing a file: all of it or none of it, and a full disk that names the file.

A file ctune writes (a result, a table, a drafted spec, an artifact) goes to a temporary
file beside it, is fsync'd, and replaces the old one in one rename: a reader sees the old
bytes or the new ones, and a failure (a full disk, a quota, Ctrl-C) leaves the old file
and removes the temporary one. An OSError raised while writing names the path
(``OSError.filename``): the command line maps a full disk (ENOSPC, EDQUOT) to one line
naming that path and exit 3 (``ctune.cli.main``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

#: errno values that mean the disk (or the user's quota) is full
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """Is ``exc`` a write refused because the disk or the quota is full?"""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL


@contextlib.contextmanager
def naming(path: Path | str, *, always: bool = False) -> Iterator[None]:
    """An OSError raised in the block names ``path`` when it names no file itself (a write
    or fsync that fails says nothing of the file it was writing), or ``always`` (the file
    it names is a temporary one the user never asked for)."""
    try:
        yield
    except OSError as exc:
        if always or exc.filename is None:
            exc.filename = str(path)
        raise


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_special(path: Path) -> bool:
    """An existing target that is not a regular file or a folder (``/dev/stdout``, a FIFO,
    ``/dev/null``): written in place, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def write_atomic(path: Path | str, data: bytes | str, *, into_special: bool = False) -> None:
    """Write ``data`` (str: UTF-8) to ``path`` whole or not at all.

    A symlink at ``path`` is replaced, never followed (nothing is written outside the
    named place). ``into_special``: an existing device or FIFO the user named as the
    output (``--out /dev/stdout``) is written in place instead.
    """
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    if into_special and _is_special(path):
        with naming(path), open(path, "wb") as fh:
            fh.write(raw)
        return
    folder = path.parent
    tmp = folder / f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    with naming(path, always=True):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_folder(folder)


__all__ = ["DISK_FULL", "is_disk_full", "naming", "write_atomic"]
