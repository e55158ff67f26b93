"""Which command takes what: a registry KEY given where a command reads a file, a file
given where it takes a KEY, or a format another command writes. Each is bad input, said
in one line that names the command that does take it (exit 2)."""

from __future__ import annotations

from pathlib import Path

from ctune.errors import UserError

#: what a search or a result is kept in: such a name is a file, never a KEY
FILE_SUFFIXES = (".json", ".jsonl", ".gz", ".yaml", ".yml", ".cu", ".cuh", ".png")
#: command -> where a KEY goes instead ({key}: the argument)
_KEY_ELSEWHERE = {
    "plot": (
        "`ctune plot` takes a search journal or a result file; for an artifact try "
        "`ctune registry show {key}`"
    ),
    "registry import": (
        "`ctune registry import` takes a search's result file; for an artifact already in "
        "the registry try `ctune registry show {key}`"
    ),
    "registry journal": (
        "`ctune registry journal` takes the artifact's KEY first, then its search's journal "
        "file: `ctune registry journal {key} JOURNAL`"
    ),
}
#: command -> where a file goes instead ({path}: the argument)
_FILE_ELSEWHERE = {
    "registry show": (
        "`ctune registry show` takes a registry KEY (<kernel>/<problem>/<device-class>); "
        "for a journal or result file try `ctune plot {path} --as json`"
    ),
    "registry export": (
        "`ctune registry export` takes a registry KEY (<kernel>/<problem>/<device-class>); "
        "for a journal or result file try `ctune export {path} --as t4`"
    ),
    "registry journal": (
        "`ctune registry journal` takes a registry KEY first, then the journal: "
        "`ctune registry journal KEY {path}`"
    ),
}
#: formats `ctune export` writes, and what each is
_EXCHANGE_FORMATS = {"t4": "T4 (Kernel Tuner's results)", "csv": "CSV"}


def _is_key(text: str) -> bool:
    """Written as a KEY: three names, no file suffix, and no such file here."""
    from ctune.registry.layout import is_key_pattern

    base = text.partition("@")[0]
    return (
        len(base.split("/")) == 3
        and not is_key_pattern(text)
        and Path(base).suffix not in FILE_SUFFIXES
        and not Path(text).exists()
    )


def _is_file(text: str) -> bool:
    """Written as a file: it is one here, or it has a suffix no KEY has."""
    return Path(text).suffix in FILE_SUFFIXES or Path(text).is_file()


def file_wanted(command: str, given: str) -> None:
    """``command`` reads a file: a KEY given instead is refused naming the command for it."""
    if not Path(given).exists() and _is_key(given):
        raise UserError(f"{given} is a registry KEY: {_KEY_ELSEWHERE[command].format(key=given)}")


def key_wanted(command: str, given: str) -> None:
    """``command`` takes a KEY: a file given instead is refused naming the command for it."""
    if _is_file(given):
        raise UserError(f"{given} is a file: {_FILE_ELSEWHERE[command].format(path=given)}")


def build_format_wanted(fmt: str, key: str) -> None:
    """``registry export`` writes what a build needs; ``ctune export`` writes T4 and CSV."""
    if fmt in _EXCHANGE_FORMATS:
        raise UserError(
            f"--as {fmt}: `ctune export {key} --as {fmt}` exports an artifact as "
            f"{_EXCHANGE_FORMATS[fmt]}; `registry export` writes build flags (flags, header, "
            "cmake, json)"
        )


def exchange_format_wanted(fmt: str, source: str) -> None:
    """``ctune export`` writes a build's formats (flags, header, cmake, json) for a KEY
    only: a journal or result file given with one is refused naming the two it takes."""
    if _is_file(source):
        what = "a journal" if source.endswith(".jsonl") else "a result file"
        raise UserError(
            f"--as {fmt}: {source} is {what}, which exports only as t4 or csv; {fmt} is for "
            "a registry KEY (<kernel>/<problem>/<device-class>)"
        )


__all__ = [
    "FILE_SUFFIXES",
    "build_format_wanted",
    "exchange_format_wanted",
    "file_wanted",
    "key_wanted",
]
