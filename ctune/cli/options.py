"""Arguments and options several commands share, declared once: the kernel and its problem,
the toolchain they build with, the folder of kernel specs they read, the format they report
in, and how a duration (``--time``, ``--step-time``) is read.

``--format`` is how a command talks (``table`` for people, ``json`` one document on
stdout, ``csv`` one row per item where the report is a list of rows); ``--as`` on the
export commands is what they export, a different thing. ``--json`` is the older
spelling of ``--format json``, kept hidden so scripts written for it keep working.
"""

from __future__ import annotations

import copy
import enum
import math
import re
import typing
from pathlib import Path
from typing import Annotated, Any

import typer

from ctune.cli import complete
from ctune.errors import UserError

KernelArg = Annotated[
    Path,
    typer.Argument(
        help="kernel .cu (its .yaml sidecar sits next to it)", autocompletion=complete.kernel_paths
    ),
]
ProblemOpt = Annotated[
    str | None,
    typer.Option(help="problem name (default: the spec's)", autocompletion=complete.problem_names),
]

NvccOpt = Annotated[
    str | None,
    typer.Option(
        "--nvcc",
        help="the nvcc to build with: a name on PATH, a path, or wheel (pip install "
        "'ctune\\[cuda13.3]')",
    ),
]
PtxasOpt = Annotated[
    str | None,
    typer.Option(
        "--ptxas",
        help="make the cubins with this ptxas (the PTX with --nvcc's), e.g. CUDA 13.3's",
    ),
]
KernelsOpt = Annotated[
    Path | None,
    typer.Option(
        "--kernels",
        help="folder of the <kernel>.yaml specs (default: the kernels setting, CTUNE_KERNELS or "
        "\\[tool.ctune] kernels, else kernels/ beside the pyproject.toml holding \\[tool.ctune])",
    ),
]


class ReportFormat(enum.StrEnum):
    """A report that is not a list of rows: for people, or one JSON document."""

    table = "table"
    json = "json"


class RowsFormat(enum.StrEnum):
    """A report that is a list of rows: also CSV, one row per item."""

    table = "table"
    json = "json"
    csv = "csv"


FORMAT_HELP = "table (for people), json (one document on stdout)"
FormatOpt = Annotated[
    ReportFormat, typer.Option("--format", metavar="table|json", help=FORMAT_HELP)
]
RowsFormatOpt = Annotated[
    RowsFormat,
    typer.Option(
        "--format", metavar="table|json|csv", help=f"{FORMAT_HELP} or csv (one row per item)"
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", hidden=True, help="the same as --format json")]


def in_panel(option: Any, panel: str) -> Any:
    """The ``typer.Option`` of ``option`` (an ``Annotated[T, typer.Option(...)]`` above),
    listed under ``panel`` in ``--help``: ``Annotated[T, in_panel(ProblemOpt, "Search")]``
    for a command that groups its options. The shared declaration is unchanged."""
    grouped = copy.copy(typing.get_args(option)[1])
    grouped.rich_help_panel = panel
    return grouped


def output_format(fmt: str, json_alias: bool = False, older: str | None = None) -> str:
    """The format a command reports in: ``--format``, or its older spellings (``--json``;
    ``older``: the value of a hidden ``--as`` that meant the same); two that disagree are
    one line of bad input."""
    chosen = str(fmt)
    given = (("--json", "json" if json_alias else None), (f"--as {older}", older))
    for option, alias in given:
        if alias is None:
            continue
        if chosen not in ("table", alias):
            raise UserError(f"{option} and --format {chosen}: give one of them")
        chosen = alias
    return chosen


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s)")


def parse_duration(text: str, option: str = "--time") -> float:
    """``30m``, ``1h30m``, ``90s``, ``2.5h`` or plain seconds -> seconds, above 0; a bad one
    is one line naming ``option`` (``--time``, ``--step-time``)."""
    raw = text.strip().lower()
    try:
        seconds = float(raw)
    except ValueError:
        seconds = _duration_units(raw, f"{option} {text!r}")
    if not math.isfinite(seconds):
        raise UserError(f"{option} {text!r}: expected a finite duration like 30m or 600")
    if seconds <= 0:
        raise UserError(f"{option} must be positive, got {seconds:g} s")
    return seconds


def _duration_units(raw: str, where: str) -> float:
    """Seconds of a duration written with units (``1h30m``)."""
    pos, total = 0, 0.0
    for match in _DURATION.finditer(raw):
        if raw[pos : match.start()].strip():
            break
        total += float(match.group(1)) * {"h": 3600, "m": 60, "s": 1}[match.group(2)]
        pos = match.end()
    if pos == 0 or raw[pos:].strip():
        raise UserError(f"{where}: expected a duration like 30m, 1h30m, 90s or 600")
    return total


__all__ = [
    "FormatOpt",
    "JsonOpt",
    "KernelArg",
    "KernelsOpt",
    "NvccOpt",
    "ProblemOpt",
    "PtxasOpt",
    "ReportFormat",
    "RowsFormat",
    "RowsFormatOpt",
    "in_panel",
    "output_format",
    "parse_duration",
]
