"""The one rule for input files: regular files only, a real byte cap, one-line errors.

Each special file is the real thing (a FIFO from ``mkfifo``, a listening Unix socket,
``/dev/zero``), and a read that would block fails the test by its timeout instead of
hanging the suite.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctune.errors import UserError
from ctune.files import InputFileError, read_capped, read_head, read_text_capped


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    os.mkfifo(path)
    return path


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "spec.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    yield path
    server.close()


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * 100)
    assert read_capped(path, 100) == b"x" * 100  # exactly the cap is allowed
    assert read_text_capped(path, 100) == "x" * 100


def test_one_byte_over_the_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * 101)
    with pytest.raises(InputFileError, match=r"^spec .*a\.txt: larger than the 100-byte limit$"):
        read_capped(path, 100, "spec")


@pytest.mark.timeout(10)
def test_a_fifo_without_a_writer_is_refused_without_blocking(fifo: Path) -> None:
    with pytest.raises(InputFileError, match=r"spec .*spec\.yaml: a FIFO, not a regular file"):
        read_capped(fifo, 1024, "spec")


@pytest.mark.timeout(10)
def test_a_fifo_with_a_writer_is_refused_too(fifo: Path) -> None:
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer open
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(writer, b"name: x\n")
        with pytest.raises(InputFileError, match="a FIFO, not a regular file"):
            read_text_capped(fifo, 1024, "spec")
    finally:
        os.close(writer)
        os.close(reader)


@pytest.mark.timeout(10)
def test_a_symlink_to_dev_zero_is_refused_before_any_read(tmp_path: Path) -> None:
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputFileError, match=r"zero\.yaml: a character device, not a regular"):
        read_capped(link, 1 << 30, "spec")  # a cap that /dev/zero would fill


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="a directory, not a regular file"):
        read_capped(tmp_path, 1024, "spec")


@pytest.mark.timeout(10)
def test_a_socket_is_refused(unix_socket: Path) -> None:
    with pytest.raises(InputFileError, match=r"spec .*spec\.sock: not a regular file"):
        read_capped(unix_socket, 1024, "spec")


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputFileError) as err:
        read_capped(tmp_path / "absent.yaml", 1024, "spec")
    assert str(err.value) == f"spec {tmp_path / 'absent.yaml'}: no such file"
    assert isinstance(err.value, UserError)  # exit 2 through ctune.cli.main


def test_text_that_is_not_utf8_is_one_line_or_replaced(tmp_path: Path) -> None:
    path = tmp_path / "latin1.cu"
    path.write_bytes(b"// caf\xe9\n")
    with pytest.raises(InputFileError, match=r"latin1\.cu: not UTF-8 text \(byte 6\)"):
        read_text_capped(path, 1024, "kernel file")
    assert read_text_capped(path, 1024, errors="replace") == "// caf\ufffd\n"


def test_symlinks_are_followed_unless_refused(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_bytes(b"{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert read_capped(link, 10) == b"{}"
    with pytest.raises(InputFileError, match=r"link\.json: a symlink"):
        read_capped(link, 10, follow_symlinks=False)
    assert read_capped(target, 10, follow_symlinks=False) == b"{}"


def test_an_unreadable_file_and_a_nul_byte_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="not a valid path"):
        read_capped(str(tmp_path / "a\0b"), 10)
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.txt"
        locked.write_bytes(b"x")
        locked.chmod(0)
        with pytest.raises(InputFileError, match=r"cannot read \(Permission denied\)"):
            read_capped(locked, 10)


def test_the_head_of_a_large_file_is_read_without_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"a" * 10_000)
    assert read_head(path, 16) == b"a" * 16
    with pytest.raises(InputFileError, match="a directory"):
        read_head(tmp_path, 16)
