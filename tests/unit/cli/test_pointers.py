"""A registry KEY where a command reads a file, a file where it takes a KEY, or a format
another command writes: one line naming the command that takes it, exit 2, nothing on
stdout. The registry is this repository's committed one."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from ctune.errors import EXIT_USER_ERROR

ROOT = Path(__file__).parents[3]
KEY = "gemm/sq4096/sm90-nvidia-h200"


def _ctune(*argv: str) -> tuple[int, str, str]:
    from ctune.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([*argv], environ={"CTUNE_REGISTRY": str(ROOT / "registry")})
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("argv", "pointer"),
    [
        (
            ["registry", "export", KEY, "--as", "t4"],
            f"`ctune export {KEY} --as t4` exports an artifact as T4",
        ),
        (["registry", "export", KEY, "--as", "csv"], f"`ctune export {KEY} --as csv`"),
        (
            ["plot", KEY],
            f"`ctune plot` takes a search journal or a result file; for an "
            f"artifact try `ctune registry show {KEY}`",
        ),
        (["registry", "import", KEY], f"try `ctune registry show {KEY}`"),
        (["registry", "show", "{file}"], "`ctune registry show` takes a registry KEY"),
        (["registry", "export", "{file}"], "try `ctune export {file} --as t4`"),
        (
            ["export", "{journal}", "--as", "flags"],
            "--as flags: {journal} is a journal, which exports only as t4 or csv",
        ),
        (
            ["export", "{file}", "--as", "header"],
            "--as header: {file} is a result file, which exports only as t4 or csv",
        ),
    ],
)
def test_the_other_kind_of_argument_names_the_command_that_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], pointer: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = tmp_path / "gemm-sq4096.json"
    result.write_text("{}")
    journal = tmp_path / "gemm-sq4096.jsonl"
    journal.write_text("{}\n")
    argv = [a.format(file=result, journal=journal) for a in argv]
    code, out, err = _ctune(*argv)
    assert code == EXIT_USER_ERROR and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert pointer.format(file=result, journal=journal) in err


def test_the_commands_pointed_to_take_it(tmp_path: Path, monkeypatch) -> None:
    """The pointers lead somewhere: `ctune export KEY --as t4` and `registry show KEY` work."""
    monkeypatch.chdir(tmp_path)
    code, out, err = _ctune("export", KEY, "--as", "t4")
    assert code == 0, err
    assert json.loads(out)["results"]
    code, out, err = _ctune("registry", "show", KEY)
    assert code == 0 and KEY in out, err
