"""A full disk is an environment error: exit 3, one line naming the path and "free space
and run again", and nothing half-written.

``/dev/full`` is the real thing where a command takes an output path. Where it does not
(a journal append, a temporary file's fsync) no unprivileged test can fill a disk, so the
one system call that fails is replaced (``os.write``, ``os.fsync``) at that single
boundary: each such test says so.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from ctune.records import Candidate, Outcome, Trial
from ctune.search import journal as journal_mod
from ctune.writes import write_atomic

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from ctune.cli import main

    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def _journal(path: Path, trials: int = 3) -> Path:
    with journal_mod.Journal.create(path, {"kernel": "k"}, fsync=False) as journal:
        for i in range(trials):
            journal.append(Trial(i, 0, Candidate.of("k", {"A": i}), Outcome.OK, values=(1.0,)))
    return path


def test_export_to_a_full_disk_is_exit_3_naming_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _journal(tmp_path / "j.jsonl")
    code, err = _main(["export", str(source), "--out", "/dev/full"], capsys)
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("error: /dev/full: ") and "free space and run again" in lines[0]


def test_an_unnamed_full_disk_is_exit_3_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OSError that names no file still maps to exit 3 (the CLI edge is one rule).
    write_atomic is replaced by one raising a bare ENOSPC (no path): the boundary."""
    import ctune.writes as writes

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writes, "write_atomic", full)
    code, err = _main(
        ["export", str(_journal(tmp_path / "j.jsonl")), "--out", str(tmp_path / "o")], capsys
    )
    assert code == 3 and "free space and run again" in err and len(err.strip().splitlines()) == 1


def test_write_atomic_keeps_the_old_file_and_removes_its_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.fsync`` of the temporary file fails as on a full disk (the replaced boundary)."""
    import ctune.writes as writes

    target = tmp_path / "table.json"
    target.write_text("old\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writes.os, "fsync", full)
    with pytest.raises(OSError) as err:
        write_atomic(target, "new\n")
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(target)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.json"]


def test_write_atomic_writes_a_device_in_place(tmp_path: Path) -> None:
    """``--out /dev/null`` is written, never replaced (as root, a rename would replace it)."""
    before = os.stat("/dev/null")
    write_atomic("/dev/null", "text", into_special=True)
    after = os.stat("/dev/null")
    assert (before.st_ino, before.st_rdev) == (after.st_ino, after.st_rdev)
    with pytest.raises(OSError) as err:
        write_atomic("/dev/full", "text", into_special=True)
    assert err.value.errno == errno.ENOSPC and err.value.filename == "/dev/full"


def test_write_atomic_writes_a_redirected_stdout_in_place(tmp_path: Path) -> None:
    """``--out /dev/stdout > file``: /dev/stdout is a link to /proc/self/fd/1, which reads
    as a regular file; the link is written through (appended to), never replaced."""
    target = tmp_path / "redirected.json"
    target.write_text("begun\n")
    fd = os.open(target, os.O_WRONLY | os.O_APPEND)
    try:
        stdout = tmp_path / "stdout"  # /dev/stdout's shape, without touching the real one
        stdout.symlink_to(f"/proc/self/fd/{fd}")
        write_atomic(stdout, "{}\n", into_special=True)
        assert stdout.is_symlink() and os.readlink(stdout) == f"/proc/self/fd/{fd}"
        assert target.read_text() == "begun\n{}\n"
        write_atomic(stdout, "replaced\n")  # not a user-named output: replaced, not followed
        assert not stdout.is_symlink() and target.read_text() == "begun\n{}\n"
    finally:
        os.close(fd)


def test_a_journal_append_that_fills_the_disk_ends_on_a_whole_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.write`` writes half the line, then fails with ENOSPC (the replaced boundary):
    the half line is cut off again and the error names the journal."""
    path = _journal(tmp_path / "j.jsonl")
    whole = path.read_bytes()
    journal, _ = journal_mod.Journal.resume(path, fsync=False)
    real_write = os.write
    calls: list[int] = []

    def half_then_full(fd: int, data: Any) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(journal_mod.os, "write", half_then_full)
    with pytest.raises(OSError) as err:
        journal.append(Trial(3, 1, Candidate.of("k", {"A": 3}), Outcome.OK, values=(1.0,)))
    monkeypatch.undo()
    journal.close()
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert len(calls) == 2 and path.read_bytes() == whole
    replay, _ = journal_mod.read(path)
    assert not replay.dropped_tail and len(replay.trials) == 3


def test_a_journal_whose_header_cannot_be_written_is_not_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.write`` fails with ENOSPC for the header (the replaced boundary)."""

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(journal_mod.os, "write", full)
    path = tmp_path / "journals" / "new.jsonl"
    with pytest.raises(OSError) as err:
        journal_mod.Journal.create(path, {"kernel": "k"})
    assert err.value.filename == str(path) and not path.exists()


def test_a_file_size_limit_is_exit_3_like_a_full_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """EFBIG (a write past RLIMIT_FSIZE) is the environment's, as ENOSPC is: the real limit,
    set in a forked child so the test process keeps its own."""
    import resource
    import signal

    source = _journal(tmp_path / "j.jsonl", trials=50)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 70
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))
            code, err = _main(["export", str(source), "--out", str(tmp_path / "o")], capsys)
            os.write(write, f"{code}\n{err}".encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as fh:
        code_text, _, err = fh.read().partition("\n")
    assert int(code_text) == 3, err
    assert "free space and run again" in err and len(err.strip().splitlines()) == 1
    assert not any(p.name.startswith(".o.tmp") for p in tmp_path.iterdir())


def test_a_fifo_output_with_no_reader_is_one_line_not_a_hang(tmp_path: Path) -> None:
    from ctune.errors import UserError

    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"out\.json: a FIFO that nobody reads"):
        write_atomic(fifo, "{}\n", into_special=True)


def test_a_fifo_output_with_a_reader_gets_all_the_bytes(tmp_path: Path) -> None:
    """More than a pipe holds: the writer waits for its reader as on any pipe."""
    import stat
    import threading
    import time

    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader is there first
    got: list[bytes] = []

    def read_all() -> None:  # until it has it all (before the writer comes, reads end at once)
        data, end = b"", time.monotonic() + 10
        while len(data) < 300_000 and time.monotonic() < end:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                chunk = b""
            data += chunk
            if not chunk:
                time.sleep(0.001)
        os.close(fd)
        got.append(data)

    reader = threading.Thread(target=read_all)
    reader.start()
    write_atomic(fifo, "x" * 300_000, into_special=True)
    reader.join(timeout=10)
    assert got == [b"x" * 300_000] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_socket_output_is_refused_in_one_line(tmp_path: Path) -> None:
    """A socket (as a block device) is no output: one line saying so, not "a FIFO"."""
    import socket

    from ctune.errors import UserError

    path = tmp_path / "out.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(UserError, match=r"out\.sock: a block device or socket"):
            write_atomic(path, "{}\n", into_special=True)


def test_check_output_refuses_what_could_not_be_written_later(tmp_path: Path) -> None:
    """A folder, a path under a file, a FIFO nobody reads: one line each, before any work;
    a character device and a new file in a folder to be made pass."""
    from ctune.errors import UserError
    from ctune.writes import check_output

    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    for path, message in (
        (tmp_path, "a folder; give a file path in it"),
        (tmp_path / "file" / "r.json", "file is not a folder"),
        (tmp_path / "fifo", "a FIFO that nobody reads"),
    ):
        with pytest.raises(UserError, match=message):
            check_output(path, "--out")
    check_output(Path("/dev/null"), "--out")
    check_output(tmp_path / "new" / "dir" / "r.json", "--out")
    assert not (tmp_path / "new").exists()  # checked, nothing made


def test_a_fifo_checked_is_held_open_until_written(tmp_path: Path) -> None:
    """Its reader is not handed the end of the stream when the check is done (a check that
    opened and closed it would end ``cat FIFO`` before the output came), and gets the
    output when it is written; a command that ends first closes it."""
    from ctune.writes import check_output, outputs_end_with_the_command

    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with outputs_end_with_the_command():
            check_output(fifo, "--out")
            with pytest.raises(BlockingIOError):  # a writer holds it: no end of stream
                os.read(fd, 10)
            write_atomic(fifo, "{}\n", into_special=True)
        assert os.read(fd, 10) == b"{}\n" and os.read(fd, 10) == b""
        with outputs_end_with_the_command():
            check_output(fifo, "--out")
            with pytest.raises(BlockingIOError):
                os.read(fd, 10)
        assert os.read(fd, 10) == b""  # the command ended without writing: closed
    finally:
        os.close(fd)


def test_write_all_or_none_puts_back_what_it_wrote_when_a_later_file_fails(
    tmp_path: Path,
) -> None:
    """The second file cannot be written (a folder is there): the first gets its old bytes
    back, a file that was not there is removed, a symlink is a symlink again."""
    from ctune.writes import write_all_or_none

    old, new, link = tmp_path / "old.yaml", tmp_path / "new.yaml", tmp_path / "link.yaml"
    old.write_text("old\n")
    (tmp_path / "target").write_text("target\n")
    link.symlink_to("target")
    (tmp_path / "ref.py").mkdir()
    with pytest.raises(OSError):
        write_all_or_none([(old, "x\n"), (new, "x\n"), (link, "x\n"), (tmp_path / "ref.py", "y\n")])
    assert old.read_text() == "old\n" and not new.exists()
    assert link.is_symlink() and os.readlink(link) == "target"
    assert (tmp_path / "target").read_text() == "target\n"
    write_all_or_none([(old, "x\n"), (new, "y\n")])
    assert old.read_text() == "x\n" and new.read_text() == "y\n"
