"""What an interrupt says it kept: its own text, else what the command recorded, else
nothing; each command starts with nothing kept. A Ctrl-C is never lost (in a finalizer)
and never changes the exit of a command that has ended; ctune's threads never take one."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ctune.interrupts import (
    NOTHING_WRITTEN,
    Interrupted,
    deferred,
    keep,
    kept_by,
    kept_with,
    nothing_kept_yet,
    settle_for_exit,
    start_thread,
    terminate_as_interrupt,
)

ROOT = Path(__file__).parents[2]


def test_a_plain_interrupt_after_a_commit_reports_the_commit() -> None:
    with terminate_as_interrupt():
        assert kept_by(KeyboardInterrupt()) == NOTHING_WRITTEN
        keep("1 artifact file(s) written and committed (abc)")
        assert kept_by(KeyboardInterrupt()) == "1 artifact file(s) written and committed (abc)"
        assert kept_by(Interrupted("its own words")) == "its own words"


def test_what_a_search_keeps_is_said_with_what_its_commit_kept() -> None:
    """The journal's line joins what a commit recorded, or the commit's own words; where
    either kept nothing, the other alone."""
    journal = "journal j.jsonl keeps 4 trial(s); continue with --resume j.jsonl"
    with terminate_as_interrupt():
        assert kept_with(KeyboardInterrupt(), journal) == journal
        keep("1 artifact file(s) written and committed (abc)")
        both = f"1 artifact file(s) written and committed (abc); {journal}"
        assert kept_with(KeyboardInterrupt(), journal) == both
        assert kept_with(Interrupted("its own words"), journal) == f"its own words; {journal}"
        assert (
            kept_with(KeyboardInterrupt(), NOTHING_WRITTEN)
            == "1 artifact file(s) written and committed (abc)"
        )
        nothing_kept_yet()  # a search starts: an earlier one's commit is not its own
        assert kept_with(KeyboardInterrupt(), journal) == journal


def test_the_next_command_starts_with_nothing_kept() -> None:
    with terminate_as_interrupt():
        keep("a commit")
    with terminate_as_interrupt():
        assert kept_by(KeyboardInterrupt()) == NOTHING_WRITTEN


def test_a_second_ctrl_c_while_stopping_keeps_exit_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that is stopping says so and exits 130: another Ctrl-C meanwhile (a user
    pressing twice, a process group signalled again) must not turn it into a traceback."""
    import ctune.cli as cli
    from ctune.cli import render

    def interrupted(argv: object) -> None:
        raise KeyboardInterrupt

    def second_ctrl_c(text: str) -> None:
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(cli, "_run", interrupted)
    monkeypatch.setattr(render, "interrupted_line", second_ctrl_c)
    try:
        cli.main(["check"])
        code: object = "returned"
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        code = "KeyboardInterrupt"
    assert code == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _exit_code(run: Callable[[], object]) -> object:
    try:
        run()
    except SystemExit as exc:
        return exc.code
    except KeyboardInterrupt:
        return "KeyboardInterrupt"
    return "returned"


class _InterruptedWhileFinalized:
    """An object whose finalizer meets the Ctrl-C, as a git repository's may when the
    garbage collector runs it just as the signal comes."""

    def __del__(self) -> None:
        raise KeyboardInterrupt


def test_a_ctrl_c_that_lands_in_a_finalizer_still_stops_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python swallows an exception raised in ``__del__`` (it prints "Exception ignored"):
    the command must still stop, with its one line and exit 130."""
    import ctune.cli as cli

    def command(argv: object) -> None:
        _InterruptedWhileFinalized()  # dropped at once: its finalizer runs here
        end = time.monotonic() + 10
        while time.monotonic() < end:  # the command's next steps
            pass
        print("finished")

    monkeypatch.setattr(cli, "_run", command)
    assert _exit_code(lambda: cli.main(["check"])) == 130
    out, err = capsys.readouterr()
    assert "finished" not in out
    assert err.strip() == "interrupted: nothing written"


def test_other_exceptions_in_a_finalizer_go_to_the_hook_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Broken:
        def __del__(self) -> None:
            raise ValueError("a finalizer's own bug")

    seen: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    with terminate_as_interrupt():
        Broken()
    assert [str(exc) for exc in seen] == ["a finalizer's own bug"]


def _run_module(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    """``python -m`` a module (the way the ``ctune`` program starts: the interpreter's own
    exit path) that replaces the command tree's run with ``source``'s ``command``."""
    (tmp_path / "program.py").write_text(
        "import ctune.cli as cli\n" + source + "\ncli._run = command\ncli.console_main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "program"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def test_a_ctrl_c_after_the_command_has_ended_changes_nothing(tmp_path: Path) -> None:
    """The signal comes while the interpreter exits (here: in an exit handler the command
    left): exit 0, the command's output, and no traceback."""
    ran = _run_module(
        tmp_path,
        "import atexit, os, signal, time\n"
        "def late():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    end = time.monotonic() + 0.2\n"
        "    while time.monotonic() < end:\n"
        "        pass\n"
        "def command(argv):\n"
        "    atexit.register(late)\n"
        "    print('done')\n",
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "done\n", "")


def test_an_interrupted_command_exits_130_through_the_program(tmp_path: Path) -> None:
    ran = _run_module(tmp_path, "def command(argv):\n    raise KeyboardInterrupt\n")
    assert (ran.returncode, ran.stderr.strip()) == (130, "interrupted: nothing written")


def test_settling_for_exit_clears_cpythons_mark_of_an_unhandled_interrupt() -> None:
    """A ``KeyboardInterrupt`` that passes out of ``exec`` of a string is marked unhandled
    even when caught, and the interpreter then ends by SIGINT instead of the command's
    exit code; the mark must be gone once the command has ended."""
    try:
        mark = ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt")
    except ValueError:
        pytest.skip("this Python keeps the mark where ctypes cannot read it")
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with contextlib.suppress(KeyboardInterrupt):
        exec("raise KeyboardInterrupt")
    assert mark.value == 1
    try:
        settle_for_exit()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert mark.value == 0
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def test_the_threads_ctune_starts_never_take_a_stop_signal() -> None:
    """So the kernel hands a Ctrl-C to the main thread, and a section of it that blocks
    the stop signals really holds them back."""
    seen: list[set[int]] = []
    thread = start_thread(lambda: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
                          name="probe")  # fmt: skip
    thread.join(timeout=10)
    assert thread.daemon
    assert {signal.SIGINT, signal.SIGTERM} <= seen[0]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def _blocked_in_a_child() -> set[int]:
    """The signals a process started now has blocked (its /proc status, SigBlk)."""
    status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True)
    mask = int(
        next(ln for ln in status.stdout.splitlines() if ln.startswith("SigBlk:")).split()[1], 16
    )
    return {sig for sig in (signal.SIGINT, signal.SIGTERM) if mask >> (sig - 1) & 1}


@pytest.mark.parametrize("children_too", [True, False])
def test_deferred_holds_the_signals_back_from_its_children_only_when_asked(
    children_too: bool,
) -> None:
    """``deferred()`` blocks the stop signals in git started in the block; with
    ``children_too=False`` (git push) the terminal's Ctrl-C still stops such a process,
    while ctune holds its own until the block ends."""
    with deferred(children_too=children_too) as held:
        blocked_there = _blocked_in_a_child()
        # to this thread: another thread that does not block it (the test runner's) would
        # take a signal sent to the process, and Python would run the handler here at once
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        time.sleep(0.05)
        assert held.signalled is not children_too  # blocked: delivered when it ends
    assert held.signals == [signal.SIGINT]
    assert blocked_there == ({signal.SIGINT, signal.SIGTERM} if children_too else set())


def _console_script() -> str:
    """What the ``ctune`` console script runs, as pip writes it from pyproject.toml."""
    import tomllib

    target = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["ctune"]
    module, _, function = target.partition(":")
    return f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n"


#: the program, with a stop signal sent to itself the moment it first imports a module:
#: sys.argv[1] names the module, sys.argv[2] the signal, sys.argv[3] how it starts
_STOPPED_AT_IMPORT = """
import importlib.abc, os, runpy, sys
module, signum, start = sys.argv[1], int(sys.argv[2]), sys.argv[3]
class StopAt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == module:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signum)
        return None
sys.meta_path.insert(0, StopAt())
sys.argv = ["ctune", "registry", "list", "--registry", "nowhere"]
if start == "-m":
    runpy.run_module("ctune", run_name="__main__", alter_sys=True)
else:
    exec(start)
"""


@pytest.mark.parametrize("start", ["-m", "script"])
@pytest.mark.parametrize("module", ["typer", "ctune.cli.render"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_while_ctune_starts_exits_130_with_its_line(
    start: str, module: str, signum: int, tmp_path: Path
) -> None:
    """A Ctrl-C or SIGTERM while the program imports its command line (typer), or in
    ``cli.main`` before it can answer one (its rich renderer): exit 130 and the one line,
    not a traceback or a death by the signal; both ways in, ``python -m ctune`` and the
    console script pyproject.toml names."""
    how = "-m" if start == "-m" else _console_script()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ran = subprocess.run(
        [sys.executable, "-c", _STOPPED_AT_IMPORT, module, str(int(signum)), how],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (ran.returncode, ran.stderr) == (130, "interrupted: nothing written\n")
