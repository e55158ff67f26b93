"""``ctune doctor``: what is there and what is missing, with what each piece is for."""

from __future__ import annotations

from typing import Annotated

import typer

from ctune.cli import app, render
from ctune.cli.common import settings
from ctune.errors import ToolchainError


@app.command("doctor")
def doctor_command(
    json_out: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Check nvcc, ptxas, CUTLASS headers, CuPy, the driver, the GPU and NVML."""
    from ctune.doctor import run_checks

    cfg = settings()
    checks = run_checks(cfg.nvcc)
    render.doctor_report(checks, json_out)
    if not checks[1].ok:
        raise ToolchainError("nvcc is required for every ctune command that compiles")
