"""The only place that prints: rich consoles, tables and progress for the CLI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from ctune.doctor import Check
    from ctune.kernelspec import KernelSpec, Problem
    from ctune.records import Build, Candidate, GeneValue

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def error_line(message: str) -> None:
    """One line on stderr: what went wrong, where, what to do."""
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)


def warn_line(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {message}", soft_wrap=True)


def print_json(data: Any) -> None:
    import json

    console.print_json(json.dumps(data, default=str))


def compile_report(
    spec: KernelSpec, problem: Problem, candidate: Candidate, build: Build, json_out: bool
) -> None:
    """One build: the exact argv, the outcome, ptxas resources, compile time, SASS digest."""
    from ctune.records import to_json

    if json_out:
        print_json(
            {
                "kernel": spec.name,
                "problem": problem.name,
                "candidate": candidate.to_json(),
                "key": candidate.key(),
                "build": to_json(build),
            }
        )
        return
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    res = build.resources
    status = "[green]ok[/]" if build.outcome.is_ok else f"[red]{build.outcome.value}[/]"
    table.add_row("kernel", f"{spec.name} ({spec.source_path.name}, entry {spec.entry_symbol})")
    table.add_row("problem", problem.name)
    table.add_row("candidate", candidate.key())
    table.add_row("outcome", status + (" (cached)" if build.cache_hit else ""))
    table.add_row("compile", f"{build.compile_s:.2f} s ({build.toolchain})")
    table.add_row(
        "resources",
        f"{res.regs if res.regs is not None else '?'} regs, "
        f"{res.spills_bytes if res.spills_bytes is not None else '?'} B spills, "
        f"{res.smem_bytes if res.smem_bytes is not None else '?'} B static smem, "
        f"{res.stack_bytes if res.stack_bytes is not None else '?'} B stack",
    )
    table.add_row("sass sha256", build.sass_sha256 or "-")
    table.add_row("output", build.binary_path or "-")
    console.print(table)
    console.print("[bold]argv[/]")
    console.print(" ".join(build.argv), soft_wrap=True, markup=False)
    if not build.outcome.is_ok and build.log_tail:
        console.print("[bold]compiler output (tail)[/]")
        console.print(build.log_tail[-1500:], markup=False)


def space_report(
    spec: KernelSpec,
    problem: Problem,
    count: int,
    exact: bool,
    samples: Sequence[dict[str, GeneValue]],
    json_out: bool,
    device: Mapping[str, Any] | None = None,
) -> None:
    """``count`` is within the device's limits when ``device`` says what they rule out."""
    space = spec.space
    if json_out:
        print_json(
            {
                "kernel": spec.name,
                "problem": problem.name,
                "genes": [
                    {
                        "name": g.name,
                        "family": g.family,
                        "values": list(g.values),
                        "default": g.default,
                        "numerics": g.numerics,
                    }
                    for g in space.genes
                ],
                "restrictions": [r.source for r in space.restrictions],
                "valid": count,
                "exact": exact,
                "product": space.cardinality(),
                "samples": samples,
                **({"device": dict(device)} if device is not None else {}),
            }
        )
        return
    from rich.table import Table

    table = Table(title=f"{spec.name}: genes ({problem.name})")
    for col in ("gene", "family", "values", "default"):
        table.add_column(col)
    for g in space.genes:
        values = ", ".join(str(v) for v in g.values)
        name = g.name + (" [yellow](numerics)[/]" if g.numerics else "")
        table.add_row(name, g.family, values, str(g.default))
    console.print(table)
    if space.restrictions:
        console.print("[bold]restrictions[/]")
        for r in space.restrictions:
            console.print(f"  {r.source}", markup=False)
    approx = "" if exact else "about "
    console.print(
        f"[bold]valid candidates:[/] {approx}{count:,} of {space.cardinality():,} combinations"
    )
    if device is not None:
        console.print(
            f"[bold]device limits[/] ({device['limits']}): rule out {device['ruled_out']:,}"
            + "".join(f"\n  {r}" for r in device["restrictions"]),
            markup=True,
            highlight=False,
        )
    if samples:
        console.print("[bold]random valid samples[/]")
        defaults = space.default_values()
        for sample in samples:
            changed = {k: v for k, v in sample.items() if v != defaults[k]}
            console.print(
                "  " + (" ".join(f"{k}={v}" for k, v in changed.items()) or "(default)"),
                markup=False,
            )


def doctor_report(
    checks: Sequence[Check],
    json_out: bool,
    stale_locks: Sequence[Any] = (),
    removed: Sequence[Any] = (),
) -> None:
    if json_out:
        print_json(
            {
                "checks": [
                    {"name": c.name, "ok": c.ok, "detail": c.detail, "needed_for": c.needed_for}
                    for c in checks
                ],
                "stale_locks": [str(lock.path) for lock in stale_locks],
                "removed": [str(p) for p in removed],
            }
        )
        return
    from rich.table import Table

    table = Table(title="ctune doctor")
    for col in ("check", "", "detail", "needed for"):
        table.add_column(col)
    for c in checks:
        table.add_row(c.name, "[green]ok[/]" if c.ok else "[red]missing[/]", c.detail, c.needed_for)
    console.print(table)
    for lock in stale_locks:
        done = lock.path in removed
        console.print(
            f"[yellow]stale git lock[/] {lock.path} ({lock.age_s:.0f} s old)"
            + (" [green]removed[/]" if done else " - run `ctune doctor --fix` to remove it"),
            markup=True,
        )
