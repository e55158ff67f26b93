"""``ctune compile`` and ``ctune space``: the compile path and the genome, no GPU needed."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Annotated

import typer

from ctune.cli import app, render
from ctune.cli.common import candidate_from_sets, load, settings
from ctune.cli.options import NvccOpt, PtxasOpt
from ctune.errors import UserError

KernelArg = Annotated[Path, typer.Argument(help="kernel .cu (its .yaml sidecar sits next to it)")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", "-s", help="NAME=VALUE for a gene; repeatable")
]
ProblemOpt = Annotated[str | None, typer.Option(help="problem name (default: the spec's)")]


@app.command("compile")
def compile_command(
    kernel: KernelArg,
    sets: SetOpt = None,
    problem: ProblemOpt = None,
    arch: Annotated[
        str | None, typer.Option(help="target, e.g. sm_90 (default: the spec's)")
    ] = None,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Compile one candidate (default build unless --set) and print argv, resources, SASS hash."""
    from ctune.compile.nvcc import NvccCompiler

    cfg = settings(arch=arch, nvcc=nvcc, ptxas=ptxas)
    spec, toolchain = load(kernel, cfg)
    candidate = candidate_from_sets(spec, sets or [])
    chosen = spec.problem(problem)
    with NvccCompiler.from_settings(spec, toolchain, cfg) as compiler:
        build = compiler.build(candidate, chosen)
    render.compile_report(spec, chosen, candidate, build, json_out)
    if build.outcome.is_ok:
        from ctune.space.limits import device_limits, launch_violation

        limits = device_limits(cfg.arch or spec.arch)
        why = launch_violation(limits, spec, candidate.as_dict(), chosen.dims, build.resources)
        if why is not None:
            render.warn_line(f"built, but cannot launch: {why} (a search counts it infeasible)")
    if not build.outcome.is_ok:
        from ctune.compile.logs import first_error_line

        raise UserError(
            f"{spec.source_path.name}: candidate {candidate.key()} did not build: "
            f"{build.outcome.value}: {first_error_line(build.log_tail)}"
        )


@app.command("space")
def space_command(
    kernel: KernelArg,
    problem: ProblemOpt = None,
    samples: Annotated[int, typer.Option(help="how many random valid candidates to show")] = 5,
    seed: Annotated[int, typer.Option(help="RNG seed for the samples")] = 0,
    arch: Annotated[
        str | None,
        typer.Option(help="target whose limits apply, e.g. sm_80 (default: the spec's)"),
    ] = None,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Show the genome: genes by family, restrictions, valid-space size, a few samples.

    Valid means within the spec's restrictions and the device's limits (threads and
    shared memory per block): the GPU's when one of the target architecture is visible
    to CuPy, else the target's table; the report says which, and how many it rules out.
    """
    from ctune.space.limits import device_limits

    cfg = settings(arch=arch, nvcc=nvcc, ptxas=ptxas)
    spec, _ = load(kernel, cfg)
    chosen = spec.problem(problem)
    limits = device_limits(cfg.arch or spec.arch)
    space = limits.constrain(spec.space, spec.launch)
    count, exact = space.count_valid(chosen.dims)
    spec_count, _ = spec.space.count_valid(chosen.dims)
    drawn = space.sample(random.Random(seed), samples, chosen.dims)
    device = {
        "limits": limits.source,
        "ruled_out": max(0, spec_count - count),
        "restrictions": [r.source for r in space.restrictions[len(spec.space.restrictions) :]],
    }
    render.space_report(spec, chosen, count, exact, drawn, json_out, device)
