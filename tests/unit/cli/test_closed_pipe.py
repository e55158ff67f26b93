"""A reader that stops early (`ctune registry list | head -1`) ends the command as SIGPIPE
does (141): rich and click exit 1 there, which reads as "check or gate failed" in a CI
pipeline with pipefail."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_tables_stop_as_sigpipe(monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    from ctune.cli import tables

    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    with pytest.raises(SystemExit) as stopped:
        tables.write(fmt, ["key"], [{"key": "gemm/sq4096/x"}])
    assert stopped.value.code == 141


def test_rich_output_stops_as_sigpipe(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctune.cli import render

    console = render._console()  # not the shared one: rich leaves a console quiet after
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    with pytest.raises(SystemExit) as stopped:
        console.print("gemm/sq4096/x  front=1")
    assert stopped.value.code == 141
    assert not render.console.quiet


def test_the_entry_point_exits_141(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ctune.cli import main

    (tmp_path / "registry").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    with pytest.raises(SystemExit) as stopped:
        main(["registry", "list", "--as", "json"])
    assert stopped.value.code == 141


def test_version_on_a_closed_pipe_exits_141(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctune.cli import main

    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 141


def test_version_without_a_stdout_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctune.cli import main

    monkeypatch.setattr(sys, "stdout", None)  # started with stdout closed (`ctune -V >&-`)
    main(["--version"])
