"""What an interrupt says it kept: its own text, else what the command recorded, else
nothing; each command starts with nothing kept."""

from __future__ import annotations

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
