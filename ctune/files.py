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


#: the largest source file read: a kernel, or one header of its closure (CUTLASS's largest
#: is about 3 MB)
MAX_SOURCE_BYTES = 16 * 1024 * 1024
#: the largest JSON data file read whole: a dispatch table, a T4 file, a problem set's state
MAX_DATA_BYTES = 64 * 1024 * 1024
#: the largest controls file taken (the nvcc space's are about 44 kB)
MAX_CONTROLS_BYTES = 1024 * 1024


class InputFileError(UserError):
    """An input file cannot be read as one: missing, not regular, too large, unreadable.

    The message is ``{what} {path}: {reason}``; ``reason`` alone lets a caller say it in
    its own words."""

    def __init__(self, what: str, path: object, reason: str) -> None:
        super().__init__(f"{what} {path}: {reason}")
        self.reason = reason


def file_kind(mode: int) -> str:
    """What a non-regular file is, for a message (``a FIFO``, ``a directory``, ...)."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_capped(
    path: Path | str, max_bytes: int, what: str = "file", *, follow_symlinks: bool = True
) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes`` bytes.

    Opened non-blocking (a FIFO would otherwise wait for a writer), checked on the open
    descriptor (no race with a swap after a ``stat``), read with a real cap. With
    ``follow_symlinks=False`` a symlink at ``path`` itself is refused (``O_NOFOLLOW``).
    """
    data = _read_regular(path, max_bytes + 1, what, follow_symlinks)
    if len(data) > max_bytes:
        raise InputFileError(what, path, f"larger than the {max_bytes}-byte limit")
    return data


def read_head(path: Path | str, n_bytes: int, what: str = "file") -> bytes:
    """The first ``n_bytes`` of ``path`` (a regular file of any size), to tell its format:
    the same checks as :func:`read_capped`, without refusing a longer file."""
    return _read_regular(path, n_bytes, what, True)


def open_regular(
    path: Path | str,
    max_bytes: int | None = None,
    what: str = "file",
    *,
    follow_symlinks: bool = True,
) -> int:
    """A blocking descriptor of the regular file ``path`` (the caller closes it), for a
    reader that streams it: the checks of :func:`read_capped` are made here. With
    ``max_bytes``, a file whose size says it is larger is refused before a byte is read
    (the caller still counts what it reads: ``st_size`` is what the file says of itself).
    """
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputFileError(what, path, "no such file") from None
    except ValueError:  # an embedded NUL byte
        raise InputFileError(what, repr(str(path)), "not a valid path") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise InputFileError(what, path, "a symlink, which is refused here") from None
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened non-blocking with no writer
            raise InputFileError(what, path, "not a regular file; give a file") from None
        raise InputFileError(what, path, f"cannot read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(what, path, f"{file_kind(st.st_mode)}, not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise InputFileError(what, path, f"larger than the {max_bytes}-byte limit")
        os.set_blocking(fd, True)
    except OSError as exc:
        os.close(fd)
        raise InputFileError(what, path, f"cannot read ({exc.strerror})") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_regular(path: Path | str, limit: int, what: str, follow_symlinks: bool) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``; anything else refused."""
    fd = open_regular(path, None, what, follow_symlinks=follow_symlinks)
    try:
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise InputFileError(what, path, f"cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text_capped(
    path: Path | str,
    max_bytes: int,
    what: str = "file",
    *,
    follow_symlinks: bool = True,
    errors: str = "strict",
) -> str:
    """:func:`read_capped`, decoded as UTF-8: with ``errors="strict"`` anything else is one
    line, not a traceback; ``"replace"`` suits source code read for its words."""
    data = read_capped(path, max_bytes, what, follow_symlinks=follow_symlinks)
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as exc:
        raise InputFileError(
            what, path, f"not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None


def unlinked_file_problem(path: Path | str, holder: str) -> str:
    """Why ``path`` (a link not followed) is not a regular file ``holder`` may open ("" when
    it is one): a symlink, a FIFO, a socket or a device is named, never opened (a FIFO
    would block the reader)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return f"cannot read: {exc.strerror}"
    if stat.S_ISLNK(mode):
        return f"is a symlink; {holder} refuses symlinks"
    if not stat.S_ISREG(mode):
        return f"{file_kind(mode)}, not a regular file; {holder} holds only files"
    return ""


def program_problem(path: Path | str) -> str | None:
    """What keeps ``path`` from being a program to run (``no such file``, ``a directory``,
    ``not executable``); None when it is one. For a tool named by path, such as ptxas."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISREG(mode):
        return file_kind(mode)
    if not os.access(path, os.X_OK):
        return "not executable (chmod +x it)"
    return None
