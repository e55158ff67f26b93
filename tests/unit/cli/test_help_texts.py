"""Every command's --help, as a user sees it (rich renders square brackets as markup)."""

from __future__ import annotations

import re
from typing import Any

from typer.testing import CliRunner


def _commands() -> list[list[str]]:
    from ctune.cli import _command

    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        for name, sub in getattr(command, "commands", {}).items():  # a group's subcommands
            walk(sub, [*path, name])

    walk(_command(), [])
    return paths


def test_every_install_hint_names_its_extra() -> None:
    """`pip install 'ctune[plot]'` lost its '[plot]' to the markup in `ctune plot --help`
    and told the user to install ctune, which they had."""
    from ctune.cli import _register_commands, app

    _register_commands()
    paths = _commands()
    assert ["plot"] in paths and ["registry", "push"] in paths
    for path in paths:
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
        assert result.exit_code == 0, (path, result.output)
        text = " ".join(re.sub("[\u2500-\u257f]", " ", result.stdout).split())
        assert "pip install 'ctune'" not in text, path
        if path == ["plot"]:
            assert "pip install 'ctune[plot]'" in text
