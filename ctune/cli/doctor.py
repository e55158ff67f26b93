"""``ctune doctor``: what is there and what is missing, with what each piece is for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ctune.cli import app, render
from ctune.cli.common import settings
from ctune.cli.options import JsonOpt, NvccOpt, PtxasOpt, RowsFormat, RowsFormatOpt, output_format
from ctune.errors import RegistryError, ToolchainError

if TYPE_CHECKING:
    from ctune.registry.locks import StaleLock

STALE_AFTER_S = 300.0  # a git lock older than this, with no live ctune writer, is left by a crash


@app.command("doctor")
def doctor_command(
    fix: Annotated[
        bool, typer.Option("--fix", help="remove stale git lock files in the registry's repository")
    ] = False,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    fmt: RowsFormatOpt = RowsFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Check the toolchains (which take advanced controls), CUTLASS headers, CuPy, the
    driver, the GPU, NVML, CompileIQ and its spaces, and registry locks."""
    import os

    from ctune.cli.invocation import invocation_environ
    from ctune.doctor import SELECTED, run_checks
    from ctune.registry.locks import clear_stale_locks

    out = output_format(fmt, json_out)
    cfg = settings(nvcc=nvcc, ptxas=ptxas)
    checks = run_checks(cfg, invocation_environ() or os.environ)
    stale = _stale_locks(cfg.registry)
    removed = clear_stale_locks(cfg.registry, STALE_AFTER_S) if fix and stale else []
    render.doctor_report(checks, out, stale_locks=stale, removed=removed)
    if not all(c.ok for c in checks if c.name == SELECTED):
        raise ToolchainError("nvcc is required for every ctune command that compiles")


def _stale_locks(registry: Path) -> list[StaleLock]:
    """Stale locks of the repository holding the registry; none when it is not in git."""
    from ctune.registry.locks import find_stale_locks

    if not registry.exists():
        return []
    try:
        return find_stale_locks(registry, STALE_AFTER_S)
    except RegistryError:
        return []
