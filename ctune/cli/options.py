"""Arguments and options several commands share, declared once: the kernel and its problem,
the toolchain they build with, the folder of kernel specs they read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctune.cli import complete

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
