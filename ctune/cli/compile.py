"""``ctune compile`` and ``ctune space``: the compile path and the genome, no GPU needed."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ctune.cli import app, render
from ctune.cli.common import candidate_from_sets, load, offer_controls, settings
from ctune.cli.options import (
    FormatOpt,
    JsonOpt,
    KernelArg,
    NvccOpt,
    ProblemOpt,
    PtxasOpt,
    ReportFormat,
    RowsFormat,
    RowsFormatOpt,
    output_format,
)
from ctune.errors import UserError

if TYPE_CHECKING:
    from ctune.spec import KernelSpec

SetOpt = Annotated[
    list[str] | None, typer.Option("--set", "-s", help="NAME=VALUE for a gene; repeatable")
]
AcfOpt = Annotated[
    str | None,
    typer.Option(
        "--acf",
        help="advanced-controls genes: ptxas, nvcc or ptxas,nvcc (CUDA 13.3+; nvcc's needs "
        "sm_100+), or none; overrides the spec's acf",
    ),
]


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
    acf: AcfOpt = None,
    acf_file: Annotated[
        Path | None,
        typer.Option(
            "--acf-file",
            help="build with this controls file: stored by its sha256 in <cache_dir>/controls "
            "and set as the acf gene of its compiler (--acf names the compiler when the spec "
            "does not name one)",
        ),
    ] = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Compile one candidate (default build unless --set) and print argv, resources, SASS hash."""
    from ctune.compile.nvcc import NvccCompiler
    from ctune.controls.offer import parse_acf_option

    out = output_format(fmt, json_out)
    cfg = settings(arch=arch, nvcc=nvcc, ptxas=ptxas)
    spec, toolchain = load(kernel, cfg)
    items = list(sets or [])
    asked, file_space = _asked_controls(spec, parse_acf_option(acf), items, acf_file is not None)
    origin = "--acf" if acf is not None else "--acf-file" if acf_file is not None else "--set"
    spec = offer_controls(spec, toolchain, cfg, asked, origin)
    if acf_file is not None:
        from ctune.controls.store import StoreChain
        from ctune.spec.space.nvcc import ACF

        digest = StoreChain.for_settings(cfg).first.put_file(acf_file, "--acf-file")
        items.append(f"{ACF[file_space].gene_name}={digest}")
    candidate = candidate_from_sets(spec, items)
    chosen = spec.problem(problem)
    broken = spec.space.violations(candidate.as_dict(), chosen.dims)
    if broken:  # nothing to compile: one line, no report of a build that never ran
        raise UserError(
            f"{spec.source_path.name}: candidate {candidate.key()} breaks restriction "
            f"{broken[0]}; choose --set values within it (`ctune space` lists them)"
        )
    with NvccCompiler.from_settings(spec, toolchain, cfg) as compiler:
        build = compiler.build(candidate, chosen)
    render.compile_report(spec, chosen, candidate, build, out)
    if build.outcome.is_ok:
        from ctune.spec.space.limits import device_limits, launch_violation

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


def _asked_controls(
    spec: KernelSpec, option: tuple[str, ...] | None, sets: list[str], with_file: bool
) -> tuple[tuple[str, ...] | None, str]:
    """(the compilers whose controls the command line asks for, None for the spec's; the
    compiler of ``--acf-file``): ``--acf``, the ``acf`` genes ``--set`` names, and the
    file's compiler: the one --acf names, else the one the spec names, else ptxas."""
    from ctune.spec.space.nvcc import ACF, ACF_GENES

    names = [item.partition("=")[0].strip() for item in sets]
    named = [ACF_GENES[n].space for n in names if n in ACF_GENES]
    file_space = ""
    if with_file:
        pool = option if option is not None else (spec.acf or ("ptxas",))
        if len(pool) != 1:
            raise UserError(
                "--acf-file: name the compiler whose controls file it is: --acf ptxas or --acf nvcc"
            )
        file_space = pool[0]
        gene = ACF[file_space].gene_name
        if gene in names:  # the file is that gene's value: set twice
            raise UserError(f"--acf-file and --set {gene}: both choose its file; give one")
        named.append(file_space)
    if option is None and not named:
        return None, file_space
    return tuple(dict.fromkeys((*(option or ()), *named))), file_space


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
    fmt: RowsFormatOpt = RowsFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Show the genome: genes by family, restrictions, valid-space size, a few samples.

    Valid means within the spec's restrictions and the device's limits (threads and
    shared memory per block): the GPU's when one of the target architecture is visible
    to CuPy, else the target's table; the report says which, and how many it rules out.
    """
    from ctune.spec.space.limits import device_limits

    out = output_format(fmt, json_out)
    if samples < 0:  # before the spec is read or nvcc probed
        raise UserError(f"--samples must be 0 or more, got {samples}")
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
    render.space_report(spec, chosen, count, exact, drawn, out, device)
