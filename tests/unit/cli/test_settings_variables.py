"""CTUNE_* variables at the command line: a bad value names its variable, and a variable
that names no setting gets one warning per command, with the closest setting's name."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from ctune.errors import EXIT_USER_ERROR

WARNING = "warning: CTUNE_JBOS is not a ctune setting and is ignored; did you mean CTUNE_JOBS?"


def _ctune(cwd: Path, environ: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTUNE_")}
    return subprocess.run(
        [sys.executable, "-m", "ctune", *argv],
        cwd=cwd,
        env={**env, **environ},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_bad_value_names_its_variable(tmp_path: Path) -> None:
    done = _ctune(tmp_path, {"CTUNE_JOBS": "lots"}, "check", "--no-gpu")
    assert done.returncode == EXIT_USER_ERROR and done.stdout == ""
    assert done.stderr == (
        "error: CTUNE_JOBS=lots: expected an integer from 0 (one per CPU core) to 1024\n"
    )


def test_a_misspelt_variable_is_one_warning_naming_the_setting(tmp_path: Path) -> None:
    (tmp_path / "registry").mkdir()
    done = _ctune(tmp_path, {"CTUNE_JBOS": "8"}, "registry", "list")
    assert done.stderr.splitlines().count(WARNING) == 1, done.stderr
    # the command still runs, with the variable ignored
    assert done.returncode == 0 and done.stdout == "no artifacts\n"


def test_a_command_run_inside_a_command_does_not_warn_again(tmp_path: Path, monkeypatch) -> None:
    """`registry retune --run` runs each search through main() in its process: the warning
    is the user's command's, once."""
    from ctune.cli import main
    from ctune.cli.invocation import invoked_with

    monkeypatch.chdir(tmp_path)
    (tmp_path / "registry").mkdir()
    environ = {"CTUNE_JBOS": "8", "PATH": os.environ.get("PATH", "")}

    def stderr_of_main() -> str:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                main(["registry", "list"], environ=environ)
            except SystemExit as exc:
                assert not exc.code
        return err.getvalue()

    assert WARNING in stderr_of_main()
    with invoked_with(environ):
        assert stderr_of_main() == ""
