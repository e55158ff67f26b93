"""compile.process: how every nvcc run starts and ends (a shell script stands in for nvcc:
what is under test is the process handling, not the compiler)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ctune.compile.process import SCRATCH_PREFIX, LiveGroups, run_nvcc
from ctune.quoting import CommandLineError


def _fake_nvcc(tmp_path: Path, body: str) -> Path:
    """An executable that records its TMPDIR and environment, then runs ``body``."""
    script = tmp_path / "bin" / "nvcc"
    script.parent.mkdir(exist_ok=True)
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$TMPDIR" > {tmp_path}/tmpdir\n'
        f'echo "${{NVCC_PREPEND_FLAGS-unset}}" > {tmp_path}/prepend\n'
        'touch "$TMPDIR/tmpxft_left_behind"\n'
        f"{body}\n"
    )
    script.chmod(0o755)
    return script


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead: it waits only for a parent (init) to collect it
    try:
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:  # reaped meanwhile
        return False
    return status != "Z"


def _wait_for(path: Path, timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.01)


def test_nvcc_gets_its_own_tmpdir_under_the_scratch_folder_removed_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NVCC_PREPEND_FLAGS", "-DEVIL=1")
    nvcc = _fake_nvcc(tmp_path, "echo out; echo err >&2; exit 3")
    cache = tmp_path / "cache"
    done = run_nvcc([str(nvcc), "k.cu"], what="nvcc", timeout_s=30, scratch=cache)
    assert (done.returncode, done.stdout, done.stderr) == (3, b"out\n", b"err\n")
    tmpdir = Path((tmp_path / "tmpdir").read_text().strip())
    assert tmpdir.parent == cache and tmpdir.name.startswith(SCRATCH_PREFIX)
    assert not tmpdir.exists() and list(cache.iterdir()) == []  # what nvcc left is gone
    assert (tmp_path / "prepend").read_text().strip() == "unset"


def test_a_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    nvcc = _fake_nvcc(tmp_path, f"sleep 60 & echo $! > {tmp_path}/child; wait")
    start = time.monotonic()
    done = run_nvcc([str(nvcc), "k.cu"], what="nvcc", timeout_s=1, scratch=tmp_path / "c")
    assert done.timed_out and time.monotonic() - start < 10
    child = int((tmp_path / "child").read_text())
    time.sleep(0.1)
    assert not _alive(child)  # the step nvcc started is gone too
    assert list((tmp_path / "c").iterdir()) == []


def test_a_capped_run_is_killed_past_its_cap_with_what_it_printed_kept(tmp_path: Path) -> None:
    """A probe reads at most its cap: a program printing without end is killed there."""
    nvcc = _fake_nvcc(tmp_path, f"sleep 60 & echo $! > {tmp_path}/child; yes x; wait")
    start = time.monotonic()
    done = run_nvcc([str(nvcc), "--version"], what="probe", timeout_s=30, max_output_bytes=4096)
    assert done.overflowed and not done.timed_out and time.monotonic() - start < 10
    assert done.stdout == b"x\n" * 2048
    time.sleep(0.1)
    assert not _alive(int((tmp_path / "child").read_text()))


def test_a_capped_run_reads_all_of_a_short_answer_and_its_timeout_kills_the_group(
    tmp_path: Path,
) -> None:
    nvcc = _fake_nvcc(tmp_path, "echo out; echo err >&2; exit 3")
    done = run_nvcc([str(nvcc)], what="probe", timeout_s=30, max_output_bytes=4096)
    assert (done.returncode, done.stdout, done.stderr, done.overflowed) == (
        3,
        b"out\n",
        b"err\n",
        False,
    )
    hung = _fake_nvcc(tmp_path, f"sleep 60 & echo $! > {tmp_path}/child; wait")
    start = time.monotonic()
    done = run_nvcc([str(hung)], what="probe", timeout_s=1, max_output_bytes=4096)
    assert done.timed_out and time.monotonic() - start < 10
    time.sleep(0.1)
    assert not _alive(int((tmp_path / "child").read_text()))


def test_an_interrupt_while_waiting_ends_the_group_and_propagates(tmp_path: Path) -> None:
    """nvcc starts with SIGINT and SIGTERM blocked (they are ctune's): ctune must end it."""
    nvcc = _fake_nvcc(tmp_path, f"sleep 60 & echo $! > {tmp_path}/child; wait")

    def interrupt() -> None:
        _wait_for(tmp_path / "child")
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Thread(target=interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        run_nvcc([str(nvcc), "k.cu"], what="nvcc", timeout_s=60, scratch=tmp_path / "c")
    timer.join()
    child = int((tmp_path / "child").read_text())
    time.sleep(0.1)
    assert not _alive(child)
    assert list((tmp_path / "c").iterdir()) == []


def test_another_thread_can_end_every_run_under_way(tmp_path: Path) -> None:
    nvcc = _fake_nvcc(tmp_path, f"touch {tmp_path}/started; sleep 60")
    live = LiveGroups()
    results = []
    worker = threading.Thread(
        target=lambda: results.append(
            run_nvcc([str(nvcc), "k.cu"], what="nvcc", timeout_s=60, live=live)
        )
    )
    worker.start()
    _wait_for(tmp_path / "started")
    live.kill_all()
    worker.join(timeout=10)
    assert not worker.is_alive() and results[0].returncode == -signal.SIGKILL


def test_an_argv_or_scratch_folder_the_shell_would_read_runs_nothing(tmp_path: Path) -> None:
    nvcc = _fake_nvcc(tmp_path, "exit 0")
    with pytest.raises(CommandLineError, match=r"'\$'"):
        run_nvcc([str(nvcc), "-DX=$(id)", "k.cu"], what="nvcc", timeout_s=30)
    with pytest.raises(CommandLineError, match=r"temporary folder .*c\$\(id\)"):
        run_nvcc([str(nvcc), "k.cu"], what="nvcc", timeout_s=30, scratch=tmp_path / "c$(id)")
    assert not (tmp_path / "tmpdir").exists()  # never started
    assert list((tmp_path / "c$(id)").iterdir()) == []


def test_the_runs_of_background_threads_end_with_the_command(tmp_path: Path) -> None:
    """A thread's run (a compile ahead, a fingerprint's -M) is killed and its temporary
    folder removed when the command ends, before the caller goes on."""
    from ctune.compile.process import runs_end_with_the_command

    nvcc = _fake_nvcc(tmp_path, f"touch {tmp_path}/started; sleep 60")
    ended: list[BaseException | object] = []

    def compile_ahead() -> None:
        try:
            ended.append(
                run_nvcc([str(nvcc), "k.cu"], what="nvcc", timeout_s=60, scratch=tmp_path / "c")
            )
        except BaseException as exc:
            ended.append(exc)

    start = time.monotonic()
    with runs_end_with_the_command():
        threading.Thread(target=compile_ahead, daemon=True).start()
        _wait_for(tmp_path / "started")
    assert time.monotonic() - start < 10 and len(ended) == 1  # ended before the block returned
    assert list((tmp_path / "c").iterdir()) == []


def test_a_pool_threads_runs_end_with_its_pool(tmp_path: Path) -> None:
    """A compiler pool's thread joins its runs (a build's ``-M`` too) to the pool's set: a
    pool that stops waits for its threads, so it must be able to end their runs."""
    from concurrent.futures import ThreadPoolExecutor

    from ctune.compile.process import pool_thread_start

    nvcc = _fake_nvcc(tmp_path, f"touch {tmp_path}/started; sleep 60")
    live = LiveGroups()
    pool = ThreadPoolExecutor(1, initializer=pool_thread_start(live))
    future = pool.submit(run_nvcc, [str(nvcc), "k.cu"], what="nvcc", timeout_s=60)
    _wait_for(tmp_path / "started")
    start = time.monotonic()
    with live.ending():
        pool.shutdown(wait=True)
    assert time.monotonic() - start < 10
    assert future.result().returncode == -signal.SIGKILL


def test_a_scratch_folder_that_cannot_be_made_names_the_folder_not_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CTUNE_CACHE_DIR naming a regular file: one line naming that folder (exit 2), nothing
    run; a full disk there stays an OSError naming it (exit 3 in ctune.cli.main)."""
    import errno
    import tempfile

    from ctune.errors import UserError

    nvcc = _fake_nvcc(tmp_path, "exit 0")
    (tmp_path / "cachefile").write_text("")
    builds = tmp_path / "cachefile" / "builds"
    with pytest.raises(UserError, match=r"cachefile/builds: nvcc's temporary folder cannot be"):
        run_nvcc([str(nvcc), "k.cu"], what="k.cu: nvcc -M", timeout_s=30, scratch=builds)

    def full(*args: object, **kwargs: object) -> str:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    with pytest.raises(OSError) as err:
        run_nvcc([str(nvcc), "k.cu"], what="nvcc", timeout_s=30, scratch=tmp_path / "c")
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(tmp_path / "c")
    assert not (tmp_path / "tmpdir").exists()  # never started
