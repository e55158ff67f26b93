"""``ctune plot``: figures of a search from its journal or its result file, or its table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctune.cli import app

FIGURE_HELP = (
    "convergence, front, sensitivity or distribution; repeatable (default: every figure the "
    "source has: a result file has no convergence or sensitivity)"
)


@app.command("plot")
def plot_command(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="JOURNAL|RESULT",
            help="a search journal (.jsonl) or a result / artifact file (.json)",
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", help="folder for the PNG files")
    ] = Path("."),
    figure: Annotated[
        list[str] | None, typer.Option("--figure", "-f", metavar="NAME", help=FIGURE_HELP)
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--as",
            metavar="csv|json",
            help="print the evaluations (journal) or members (result) as a table instead",
        ),
    ] = None,
) -> None:
    """Plot a search: convergence (best so far vs evaluations and time), the Pareto front
    with the baseline, per-gene sensitivity and the front's measured distributions.

    Writes <journal>-<figure>.png (a journal, by its file name) or
    <kernel>-<problem>-<device-class>-<figure>.png (a result file) into --out. Needs
    matplotlib (pip install 'ctune\\[plot]'); --as csv|json needs nothing more.
    """
    from ctune.cli import pointers, render, tables

    pointers.file_wanted("plot", str(source))
    if fmt is not None:
        from ctune.plot.data import load, rows

        tables.check_format(fmt)
        data = load(source)
        header, body = rows(data)
        document = {
            "kind": data.kind,
            "kernel": data.kernel,
            "problem": data.problem,
            "device": data.device,
            "objectives": [
                {"name": o.name, "direction": o.direction, "unit": o.unit} for o in data.objectives
            ],
            "constraints": list(data.constraints),
            "pinned": data.pinned,
        }
        tables.write(fmt, header, body, document)
        return
    from ctune.plot import plot_source

    for name, path in plot_source(source, out, figure or ()):
        render.line((name, "bold"), f" {path}")
