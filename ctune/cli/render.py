"""The only place that prints: rich consoles, tables and progress for the CLI.

Nothing printed is parsed as rich markup (markup and emoji codes are off), so a path like
``kernels/[/x].cu`` prints as itself; styled parts are :class:`rich.text.Text` spans from
:func:`styled`, and all text passes :mod:`ctune.cli.sanitize`. :func:`report` gives every
command's report in the form ``--format`` asked for (table, JSON or CSV). Output that is not
a terminal is not laid out for a screen: tables take their natural width (``COLUMNS`` still
asks for one) and no line ends in padding.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console, ConsoleDimensions
from rich.text import Text

from ctune.cli.sanitize import block, one_line

if TYPE_CHECKING:
    from ctune.doctor import Check
    from ctune.records import Build, Candidate, GeneValue
    from ctune.spec import KernelSpec, Problem


def stop_for_closed_pipe() -> NoReturn:
    """The reader went away (``ctune registry list | head``): stop without a traceback and
    exit as a process ended by SIGPIPE (141), never 1, the "check or gate failed" code that
    rich and click would give."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush at exit
    except (OSError, ValueError):  # stdout is not a real file (tests): nothing to redirect
        pass
    sys.exit(141)


#: the width of output that is not a terminal: wide enough that nothing is folded or wrapped
UNBOUNDED_WIDTH = 100_000
_TRAILING_BLANKS = re.compile(r"[ \t]+(?=\n|$)")


class _Console(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        stop_for_closed_pipe()

    def _unbounded(self) -> bool:
        """Output read by a program or a log, not a screen: no width to fit (unless
        ``COLUMNS`` asks for one, as a reader of a given terminal would see it)."""
        return not self.is_terminal and not os.environ.get("COLUMNS", "").isdigit()

    @property  # type: ignore[override]
    def size(self) -> ConsoleDimensions:
        dims = Console.size.fget(self)  # type: ignore[attr-defined]
        if self._width is None and self._unbounded():
            return ConsoleDimensions(UNBOUNDED_WIDTH, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def _render_buffer(self, buffer: Any) -> str:
        # a table pads each row to its width: a file or a pipe gets no trailing blanks
        text = super()._render_buffer(buffer)
        return text if self.is_terminal else _TRAILING_BLANKS.sub("", text)


def _console(stderr: bool = False) -> Console:
    made = _Console(stderr=stderr, highlight=False, markup=False, emoji=False)
    # rich fixes the width from COLUMNS when the console is made (at import); read the
    # terminal (or COLUMNS) at each print instead, as a fresh process would
    made._width = None
    return made


console = _console()
err_console = _console(stderr=True)

Part = str | tuple[str, str]


def styled(*parts: Part) -> Text:
    """One line from plain strings and (text, style) pairs; every piece sanitised."""
    text = Text()
    for part in parts:
        if isinstance(part, str):
            text.append(one_line(part))
        else:
            text.append(one_line(part[0]), style=part[1])
    return text


def line(*parts: Part, stderr: bool = False) -> None:
    """Print one unwrapped line (CI logs stay greppable, narrow terminals fold it)."""
    (err_console if stderr else console).print(styled(*parts), soft_wrap=True)


def error_line(message: str) -> None:
    """One line on stderr: what went wrong, where, what to do."""
    line(("error:", "bold red"), " ", message, stderr=True)


def interrupted_line(kept: str) -> None:
    """The one line a Ctrl-C (or SIGTERM) ends a command with: what was kept."""
    from ctune.interrupts import INTERRUPTED

    line((INTERRUPTED, "yellow"), " ", kept, stderr=True)


def warn_line(message: str) -> None:
    line(("warning:", "yellow"), " ", message, stderr=True)


def note_line(message: str) -> None:
    """A line of advice on stderr: nothing is wrong, a setting would serve better."""
    line(("note:", "cyan"), " ", message, stderr=True)


def log_block(title: str, body: str) -> None:
    """A titled multi-line text such as a compiler log: lines kept, controls escaped."""
    line((title, "bold"))
    console.print(Text(block(body)), soft_wrap=True)


def write_out(text: str) -> None:
    """Text for another program on stdout as it is (JSON, CSV, T4): never wrapped or
    styled; a reader that stops early (``| head``) ends the command as SIGPIPE does."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # click would turn it into exit 1
        stop_for_closed_pipe()


def print_json(data: Any) -> None:
    """JSON on stdout as one document (ASCII, strict: no NaN; ``tables.json_text``)."""
    from ctune.cli.tables import json_text

    write_out(json_text(data))


Rows = tuple[Sequence[str], Sequence[Mapping[str, Any]]]


def report(
    fmt: str,
    document: Callable[[], Any],
    table: Callable[[], None],
    rows: Callable[[], Rows] | None = None,
) -> None:
    """A command's report in the form ``--format`` asked for: ``table()`` prints it for
    people; ``document()`` is its JSON (one document on stdout); ``rows()`` its CSV
    (header, rows), for a report that is a list of items."""
    if fmt == "json":
        print_json(document())
    elif fmt == "csv":
        if rows is None:  # the option's choices exclude it: a caller's mistake
            raise ValueError("this report has no rows for CSV")
        from ctune.cli.tables import csv_text

        write_out(csv_text(*rows()))
    else:
        table()


def progress_line(fmt: str, *parts: Part) -> None:
    """A line said while a command works (one per artifact gated, per generation): on
    stdout beside a table, on stderr when stdout carries a document for a program."""
    line(*parts, stderr=fmt != "table")


def _kv_table() -> Any:
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    return table


def compile_report(
    spec: KernelSpec, problem: Problem, candidate: Candidate, build: Build, fmt: str
) -> None:
    """One build: the exact argv, the outcome, ptxas resources, compile time, SASS digest."""
    from ctune.records import to_json

    def document() -> dict[str, Any]:
        return {
            "kernel": spec.name,
            "problem": problem.name,
            "candidate": candidate.to_json(),
            "key": candidate.key(),
            "build": to_json(build),
        }

    report(fmt, document, lambda: _compile_table(spec, problem, candidate, build))


def _compile_table(spec: KernelSpec, problem: Problem, candidate: Candidate, build: Build) -> None:
    table = _kv_table()
    res = build.resources
    status = styled(
        (build.outcome.value, "green" if build.outcome.is_ok else "red"),
        " (cached)" if build.cache_hit else "",
    )
    table.add_row("kernel", f"{spec.name} ({spec.source_path.name}, entry {spec.entry_symbol})")
    table.add_row("problem", problem.name)
    table.add_row("candidate", candidate.key())
    table.add_row("outcome", status)
    table.add_row("compile", f"{build.compile_s:.2f} s ({build.toolchain})")
    table.add_row(
        "resources",
        f"{res.regs if res.regs is not None else '?'} regs, "
        f"{res.spills_bytes if res.spills_bytes is not None else '?'} B spills, "
        f"{res.smem_bytes if res.smem_bytes is not None else '?'} B static smem, "
        f"{res.stack_bytes if res.stack_bytes is not None else '?'} B stack",
    )
    table.add_row("sass sha256", build.sass_sha256 or "-")
    console.print(table)
    line(("output", "bold"), "       ", build.binary_path or "-")  # a path: never folded
    line(("argv", "bold"))
    line(" ".join(build.argv))
    if not build.outcome.is_ok and build.log_tail:
        log_block("compiler output (tail)", build.log_tail[-1500:])


def space_report(
    spec: KernelSpec,
    problem: Problem,
    count: int,
    exact: bool,
    samples: Sequence[dict[str, GeneValue]],
    fmt: str,
    device: Mapping[str, Any] | None = None,
) -> None:
    """``count`` is within the device's limits when ``device`` says what they rule out;
    its CSV is the genes, one row each."""
    space = spec.space
    genes = [
        {
            "name": g.name,
            "family": g.family,
            "values": list(g.values),
            "default": g.default,
            "numerics": g.numerics,
        }
        for g in space.genes
    ]

    def document() -> dict[str, Any]:
        return {
            "kernel": spec.name,
            "problem": problem.name,
            "genes": genes,
            "restrictions": [r.source for r in space.restrictions],
            "valid": count,
            "exact": exact,
            "product": space.cardinality(),
            "samples": samples,
            **({"device": dict(device)} if device is not None else {}),
        }

    report(
        fmt,
        document,
        lambda: _space_table(spec, problem, count, exact, samples, device),
        lambda: (["name", "family", "values", "default", "numerics"], genes),
    )


def _space_table(
    spec: KernelSpec,
    problem: Problem,
    count: int,
    exact: bool,
    samples: Sequence[dict[str, GeneValue]],
    device: Mapping[str, Any] | None,
) -> None:
    from rich.table import Table

    space = spec.space
    table = Table(title=f"{spec.name}: genes ({problem.name})")
    table.add_column("gene", no_wrap=True)
    table.add_column("family", no_wrap=True)
    table.add_column("values", overflow="fold")
    table.add_column("default", overflow="fold")
    for g in space.genes:
        values = ", ".join(str(v) for v in g.values)
        name = styled(g.name, *([(" (numerics)", "yellow")] if g.numerics else []))
        table.add_row(name, g.family, values, str(g.default))
    console.print(table)
    if space.restrictions:
        line(("restrictions", "bold"))
        for r in space.restrictions:
            line(f"  {r.source}")
    approx = "" if exact else "about "
    line(
        ("valid candidates:", "bold"),
        f" {approx}{count:,} of {space.cardinality():,} combinations",
    )
    if device is not None:
        line(("device limits", "bold"), f" ({device['limits']}): rule out {device['ruled_out']:,}")
        for r in device["restrictions"]:
            line(f"  {r}")
    if samples:
        line(("random valid samples", "bold"))
        defaults = space.default_values()
        for sample in samples:
            changed = {k: v for k, v in sample.items() if v != defaults[k]}
            line("  " + (" ".join(f"{k}={v}" for k, v in changed.items()) or "(default)"))


def doctor_report(
    checks: Sequence[Check],
    fmt: str,
    stale_locks: Sequence[Any] = (),
    removed: Sequence[Any] = (),
) -> None:
    """Each check's row; its CSV is those rows (the locks are in the JSON and the table)."""
    header = ["name", "ok", "detail", "needed_for"]
    rows = [
        {"name": c.name, "ok": c.ok, "detail": c.detail, "needed_for": c.needed_for} for c in checks
    ]

    def document() -> dict[str, Any]:
        return {
            "checks": rows,
            "stale_locks": [str(lock.path) for lock in stale_locks],
            "removed": [str(p) for p in removed],
        }

    report(
        fmt, document, lambda: _doctor_table(checks, stale_locks, removed), lambda: (header, rows)
    )


def _doctor_table(
    checks: Sequence[Check], stale_locks: Sequence[Any], removed: Sequence[Any]
) -> None:
    from rich.table import Table

    table = Table(title="ctune doctor")
    table.add_column("check", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("detail", overflow="fold")
    table.add_column("needed for", overflow="fold")
    for c in checks:
        mark = styled(("ok", "green") if c.ok else ("missing", "red"))
        table.add_row(c.name, mark, one_line(c.detail), one_line(c.needed_for))
    console.print(table)
    for lock in stale_locks:
        done = lock.path in removed
        line(
            ("stale git lock", "yellow"),
            f" {lock.path} ({lock.age_s:.0f} s old)",
            ("  removed", "green") if done else " - run `ctune doctor --fix` to remove it",
        )
