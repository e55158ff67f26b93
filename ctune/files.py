"""Read a file named by a user or found in a repository: the one rule for input files.

Only regular files are read (a FIFO, a device or a socket is refused before any byte is
read, so nothing blocks and ``/dev/zero`` is not read until memory runs out), and at most
``max_bytes`` are read whatever ``st_size`` claims. Symlinks are followed; what they point
to must pass the same checks. The errors are one line naming the path and the fix.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ctune.errors import UserError

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


class InputFileError(UserError):
    """An input file cannot be read as one: missing, not regular, too large, unreadable."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, for a message (``a FIFO``, ``a directory``, ...)."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def open_regular(path: Path | str, max_bytes: int, what: str = "file") -> int:
    """A blocking descriptor of ``path``, a regular file whose size is at most ``max_bytes``
    (the caller still reads with a real cap: ``st_size`` is what the file says of itself).

    Opened non-blocking (a FIFO would otherwise wait for a writer), checked on the open
    descriptor (no race with a swap after a ``stat``). The caller closes it.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise InputFileError(f"{what} {path}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened non-blocking with no writer
            raise InputFileError(f"{what} {path}: not a regular file; give a file") from None
        raise InputFileError(f"{what} {path}: cannot read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"{what} {path}: {file_kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise InputFileError(f"{what} {path}: larger than the {max_bytes}-byte limit")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_capped(path: Path | str, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes`` bytes
    (:func:`open_regular`), read with a real cap."""
    path = Path(path)
    fd = open_regular(path, max_bytes, what)
    try:
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise InputFileError(f"{what} {path}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InputFileError(f"{what} {path}: larger than the {max_bytes}-byte limit")
    return data


def read_text_capped(path: Path | str, max_bytes: int, what: str = "file") -> str:
    """:func:`read_capped`, decoded as UTF-8 (anything else is one line, not a traceback)."""
    data = read_capped(path, max_bytes, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"{what} {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
