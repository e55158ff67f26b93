"""Arguments and options several commands share, declared once: the kernel and its problem,
the toolchain they build with, the folder of kernel specs they read, and how a duration
(``--time``, ``--step-time``) is read."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated

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
        help="the nvcc to build with: a name on PATH, a path, or wheel (the nvidia-cuda-nvcc "
        "wheel's: pip install 'ctune\\[cuda13.3]')",
    ),
]
PtxasOpt = Annotated[
    str | None,
    typer.Option(
        "--ptxas",
        help="make the cubins with this ptxas, the PTX still with --nvcc's (e.g. a CUDA 13.3 "
        "ptxas, for advanced controls)",
    ),
]
KernelsOpt = Annotated[
    Path | None,
    typer.Option(
        "--kernels",
        help="folder of the <kernel>.yaml specs (default: the kernels setting, CTUNE_KERNELS or "
        "[tool.ctune] kernels, else kernels/ beside the pyproject.toml holding [tool.ctune])",
    ),
]


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s)")


def parse_duration(text: str) -> float:
    """``30m``, ``1h30m``, ``90s``, ``2.5h`` or plain seconds -> seconds."""
    raw = text.strip().lower()
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise UserError(f"--time {text!r}: expected a finite duration like 30m or 600")
        return seconds
    pos, total = 0, 0.0
    for match in _DURATION.finditer(raw):
        if raw[pos : match.start()].strip():
            break
        total += float(match.group(1)) * {"h": 3600, "m": 60, "s": 1}[match.group(2)]
        pos = match.end()
    if pos == 0 or raw[pos:].strip():
        raise UserError(f"--time {text!r}: expected a duration like 30m, 1h30m, 90s or 600")
    return total
