"""Every command's --help fits a terminal at 80 columns and names every option it takes.

`ctune search --help` once ran to 467 lines at 80 columns: each option's text, with the
full lists of objective terms, units and strategy options, was wrapped into a column a
fifth of the screen wide. The lists live in docs/search.md now; the help says where.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from typer.testing import CliRunner

#: the most lines a command's --help may take at 80 columns
LIMITS = {("search",): 120}
DEFAULT_LIMIT = 80


def _commands() -> list[tuple[tuple[str, ...], Any]]:
    from ctune.cli import _command

    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():  # a group's subcommands
            walk(sub, (*path, name))

    walk(_command(), ())
    return found


COMMANDS = _commands()


def _help(path: tuple[str, ...], columns: int = 80) -> str:
    from ctune.cli import _register_commands, app

    _register_commands()
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, (path, result.output)
    return result.stdout


def test_every_command_is_walked() -> None:
    paths = {path for path, _ in COMMANDS}
    assert {(), ("search",), ("gate",), ("registry",), ("registry", "retune")} <= paths


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(path) or "ctune" for path, _ in COMMANDS]
)
def test_help_fits_and_names_every_option(path: tuple[str, ...], command: Any) -> None:
    text = _help(path)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, path  # drawn at the width asked for
    limit = LIMITS.get(path, DEFAULT_LIMIT)
    assert len(lines) <= limit, f"ctune {' '.join(path)} --help: {len(lines)} lines > {limit}"
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "option":
            names = [*param.opts, *param.secondary_opts]
        else:
            names = [param.metavar or str(param.name).upper()]  # an argument: its metavar
        for name in names:
            assert name in text, f"ctune {' '.join(path)} --help does not show {name}"


#: a bracketed run in a help text (``\[`` is how a help escapes one for rich)
_BRACKETED = re.compile(r"\\?\[[^\[\]]*\]")


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(path) or "ctune" for path, _ in COMMANDS]
)
def test_help_keeps_bracketed_text(path: tuple[str, ...], command: Any) -> None:
    """Typer reads help as rich markup, which drops an unescaped ``[tool.ctune]`` without a
    word: `ctune check --help` once said "beside the pyproject.toml holding )"."""
    shown = _flat(_help(path, columns=300))
    texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    for text in texts:
        for match in _BRACKETED.finditer(text):
            run = re.sub(r"\s+", " ", match.group(0).removeprefix("\\"))
            assert run in shown, f"ctune {' '.join(path)} --help drops {run!r} (escape it: \\[)"


def _flat(text: str) -> str:
    """The help's words with the panels' borders and the line breaks taken out."""
    return re.sub(r"[│╭╮╰╯─\s]+", " ", text)
