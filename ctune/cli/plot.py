"""``ctune plot``: figures of a search from its journal or its result file, or its table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctune.cli import app
from ctune.cli.options import JsonOpt, RowsFormat, RowsFormatOpt, output_format

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
            help="a search journal (.jsonl, or the registry's .jsonl.gz copy) or a result / "
            "artifact file (.json)",
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
            help="print the evaluations (journal) or members (result) as a table instead "
            "of drawing figures",
        ),
    ] = None,
    fmt_out: RowsFormatOpt = RowsFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Plot a search: convergence (best so far vs evaluations and time), the Pareto front
    with the baseline, per-gene sensitivity and the front's measured distributions.

    Writes <journal>-<figure>.png (a journal, by its file name) or
    <kernel>-<problem>-<device-class>-<figure>.png (a result file) into --out. Needs
    matplotlib (pip install 'ctune\\[plot]'); --as csv|json needs nothing more. --format
    says which files were written (figure, path): a table, JSON or CSV.
    """
    from ctune.cli import pointers, render, tables
    from ctune.errors import UserError

    pointers.file_wanted("plot", str(source))
    out_fmt = output_format(fmt_out, json_out)
    if fmt is not None and out_fmt != "table":
        raise UserError(
            f"--as {fmt} prints the evaluations instead of figures; --format {out_fmt} is "
            "for the list of figures drawn: give one of them"
        )
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
        render.write_out(tables.text(fmt, header, body, document))
        return
    from ctune.plot import plot_source

    drawn = [
        {"figure": name, "path": str(path)} for name, path in plot_source(source, out, figure or ())
    ]

    def table() -> None:
        for row in drawn:
            render.line((row["figure"], "bold"), f" {row['path']}")

    render.report(out_fmt, lambda: {"figures": drawn}, table, lambda: (["figure", "path"], drawn))
