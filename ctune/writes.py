"""Writing a file: all of it or none of it, and a full disk that names the file.

A file ctune writes (a result, a table, a drafted spec, an artifact) goes to a temporary
file beside it, is fsync'd, and replaces the old one in one rename: a reader sees the old
bytes or the new ones, and a failure (a full disk, a quota, Ctrl-C) leaves the old file
and removes the temporary one. An OSError raised while writing names the path
(``OSError.filename``): the command line maps a full disk (ENOSPC, EDQUOT, EFBIG) to one
line naming that path and exit 3 (``ctune.cli.main``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from ctune.errors import UserError

#: errno values that mean the disk, the user's quota or the file-size limit is full: the
#: environment's to fix, not the path's (EFBIG: a write past RLIMIT_FSIZE or the file
#: system's largest file)
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def is_disk_full(exc: BaseException) -> bool:
    """Is ``exc`` a write refused because the disk, the quota or a size limit is full?"""
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


def _special_kind(path: Path) -> str | None:
    """What an existing target that is not a regular file or a folder is: "device" (a
    character device: ``/dev/null``, ``/dev/stdout`` on a terminal), "fifo" (a named pipe,
    ``--out >(jq .)``), "descriptor" (``/dev/stdout`` redirected to a file) or "other" (a
    block device, a socket); None for anything else."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return None
    if stat.S_ISREG(mode):
        # /dev/stdout redirected to a file: replacing the link would break it for everyone
        return "descriptor" if _names_a_descriptor(path) else None
    if stat.S_ISCHR(mode):
        return "device"
    return "fifo" if stat.S_ISFIFO(mode) else "other"


_DESCRIPTOR = re.compile(r"^/(?:proc/(?:self|\d+)|dev)/fd/\d+$")


def _names_a_descriptor(path: Path) -> bool:
    """``path`` is, through its links, a process's open file (``/dev/stdout`` is a link to
    ``/proc/self/fd/1``): the output goes where that descriptor points."""
    current = str(path)
    for _ in range(40):  # the kernel's own limit on a chain of links
        if _DESCRIPTOR.match(current):
            return True
        if not os.path.islink(current):
            return False
        target = os.readlink(current)
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return False


#: FIFOs opened for writing when a command's outputs were checked (:func:`check_output`),
#: by (st_dev, st_ino): held open until written, so that their readers wait for the output
#: instead of reading the end of a stream the check opened and closed
_HELD: dict[tuple[int, int], int] = {}


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _open_fifo(path: Path) -> int:
    """The FIFO's write end, opened non-blocking: one nobody reads would otherwise wait for
    a reader forever; with no reader it is one line (exit 2)."""
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise UserError(
                f"{path}: a FIFO that nobody reads; start its reader first, or give a file"
            ) from None
        exc.filename = exc.filename or str(path)
        raise


def _refuse_other(path: Path) -> NoReturn:
    raise UserError(
        f"{path}: a block device or socket, which ctune does not write an output into; "
        "give a file path"
    )


def _open_device(path: Path, kind: str | None) -> int:
    """A device, or a descriptor's file appended to (what the shell's redirect began stays)."""
    append = os.O_APPEND if kind == "descriptor" else 0
    with naming(path):
        return os.open(path, os.O_WRONLY | os.O_NOCTTY | append)


def _write_in_place(path: Path, raw: bytes) -> None:
    """Write into an existing character device or FIFO (a FIFO held since its check, else
    opened now); a block device or a socket is refused."""
    kind = _special_kind(path)
    if kind == "other":
        _refuse_other(path)
    fd = _HELD.pop(_identity(path), None) if kind == "fifo" else None
    if fd is None:
        fd = _open_fifo(path) if kind == "fifo" else _open_device(path, kind)
    with naming(path), os.fdopen(fd, "wb") as fh:
        os.set_blocking(fd, True)  # a slow reader is waited for, as any pipe's
        fh.write(raw)


def _nearest_existing(path: Path) -> Path:
    """``path`` or the closest folder above it that is there (``.`` at the end)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def check_output(path: Path | str, option: str) -> None:
    """Refuse now, in one line (exit 2), an output path a command could not write when it
    is done (``--out``, ``--plot``): a folder, a block device or socket, a FIFO nobody
    reads, a parent that is a file or cannot be written. A FIFO that is read is held open
    from here until it is written (:data:`_HELD`). A character device or a descriptor's
    file passes: it is written in place, as :func:`write_atomic` with ``into_special`` does."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{option} {path}: a folder; give a file path in it")
    kind = _special_kind(path)
    if kind == "other":
        _refuse_other(path)
    if kind == "fifo":
        key = _identity(path)
        if key not in _HELD:
            _HELD[key] = _open_fifo(path)
        return
    if kind in ("device", "descriptor"):
        return
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        raise UserError(f"{option} {path}: {base} is not a folder; give a path under a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: cannot write into {base}; give a writable path")


@contextlib.contextmanager
def outputs_end_with_the_command() -> Iterator[None]:
    """When the block (a command) ends, however it ends, every FIFO :func:`check_output`
    held for it and nothing wrote into is closed: its reader then sees the end of the
    stream instead of waiting for this process to exit."""
    before = set(_HELD)
    try:
        yield
    finally:
        for key in set(_HELD) - before:
            os.close(_HELD.pop(key))


def write_atomic(path: Path | str, data: bytes | str, *, into_special: bool = False) -> None:
    """Write ``data`` (str: UTF-8) to ``path`` whole or not at all.

    A symlink at ``path`` is replaced, never followed (nothing is written outside the
    named place). ``into_special``: an existing character device or FIFO the user named
    as the output (``--out /dev/stdout``) is written in place instead (a FIFO with no
    reader is refused, as is a block device or a socket: :func:`_write_in_place`); every
    user-named output is written so, and checked before the work by :func:`check_output`.
    """
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    if into_special and _special_kind(path) is not None:
        _write_in_place(path, raw)
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


def _restorer(path: Path) -> Callable[[], None]:
    """What puts ``path`` back as it is now: its bytes, its symlink, or nothing there."""
    if path.is_symlink():
        target = os.readlink(path)

        def relink() -> None:
            path.unlink(missing_ok=True)
            os.symlink(target, path)

        return relink
    if path.is_file():
        data = path.read_bytes()
        return lambda: write_atomic(path, data)
    return lambda: path.unlink(missing_ok=True)


def write_all_or_none(files: Sequence[tuple[Path, str | bytes]]) -> None:
    """Write each ``(path, data)`` with :func:`write_atomic`, all of them or none: when one
    fails, the files written before it are put back as they were (or removed where there
    was none), so that files that belong together (a spec and its reference) never mix."""
    done: list[Callable[[], None]] = []
    try:
        for path, data in files:
            restore = _restorer(Path(path))
            write_atomic(path, data)
            done.append(restore)
    except BaseException:
        for restore in reversed(done):
            with contextlib.suppress(OSError):
                restore()
        raise


__all__ = [
    "DISK_FULL",
    "check_output",
    "is_disk_full",
    "naming",
    "outputs_end_with_the_command",
    "write_all_or_none",
    "write_atomic",
]
