"""What an interrupt says it kept: its own text, else what the command recorded, else
nothing; each command starts with nothing kept."""

from __future__ import annotations

import os
import signal

import pytest

from ctune.interrupts import (
    NOTHING_WRITTEN,
    Interrupted,
    keep,
    kept_by,
    terminate_as_interrupt,
)


def test_a_plain_interrupt_after_a_commit_reports_the_commit() -> None:
    with terminate_as_interrupt():
        assert kept_by(KeyboardInterrupt()) == NOTHING_WRITTEN
        keep("1 artifact file(s) written and committed (abc)")
        assert kept_by(KeyboardInterrupt()) == "1 artifact file(s) written and committed (abc)"
        assert kept_by(Interrupted("its own words")) == "its own words"


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
