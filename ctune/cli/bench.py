"""``ctune bench``: compile one candidate, check it, time it (and its energy) on the GPU."""

from __future__ import annotations

from typing import Annotated

import typer

from ctune.cli import app
from ctune.cli.common import candidate_from_sets, load, settings
from ctune.cli.options import (
    FormatOpt,
    JsonOpt,
    KernelArg,
    NvccOpt,
    ProblemOpt,
    PtxasOpt,
    ReportFormat,
    output_format,
)
from ctune.errors import EXIT_GATE_FAILED, CtuneError, ToolchainError, UserError


class CandidateFailed(CtuneError):
    """The candidate was measured and is not OK; the report above has the evidence."""

    exit_code = EXIT_GATE_FAILED


@app.command("bench")
def bench_command(
    kernel: KernelArg,
    sets: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="NAME=VALUE for a gene; repeatable")
    ] = None,
    problem: ProblemOpt = None,
    energy: Annotated[
        bool, typer.Option("--energy", help="also measure energy per call and average power (NVML)")
    ] = False,
    energy_window: Annotated[
        float | None, typer.Option("--energy-window", help="energy window in seconds (>= 1)")
    ] = None,
    timing: Annotated[
        str | None,
        typer.Option(help="events (one launch per sample), graph (replays of many) or auto"),
    ] = None,
    l2_policy: Annotated[
        str | None,
        typer.Option("--l2-policy", "--l2", help="cold (flush L2 before each sample) or hot"),
    ] = None,
    samples: Annotated[
        int | None, typer.Option("--samples", "-n", help="exactly this many timing samples")
    ] = None,
    quantile: Annotated[
        float, typer.Option(help="the tail that matters; raises n (p99 on µs kernels: >= 1000)")
    ] = 0.99,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="hang limit in seconds (default: derived)")
    ] = None,
    vendor: Annotated[
        bool,
        typer.Option(
            "--vendor", help="also time the spec's vendor call (cuBLAS, SDPA), in its own process"
        ),
    ] = False,
    device: Annotated[int, typer.Option(help="CUDA device index")] = 0,
    arch: Annotated[
        str | None, typer.Option(help="target, e.g. sm_90 (default: the spec's)")
    ] = None,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Check one candidate against the reference and time it (p50/p95/p99 with 95% CIs).

    Exits 1 when the candidate is not OK (wrong result, fault, hang, inconclusive).
    """
    from ctune.cli import render_bench
    from ctune.compile.nvcc import NvccCompiler
    from ctune.measure.plan import plan_for, validate
    from ctune.measure.session import WorkerMeasurer
    from ctune.search.session import gpu_available

    out = output_format(fmt, json_out)
    cfg = settings(
        arch=arch,
        energy_window_s=energy_window,
        l2_policy=l2_policy,
        timing=timing,
        nvcc=nvcc,
        ptxas=ptxas,
    )
    spec, toolchain = load(kernel, cfg)
    candidate = candidate_from_sets(spec, sets or [])
    chosen = spec.problem(problem)
    plan = plan_for(
        cfg,
        spec,
        # --l2-policy / CTUNE_L2_POLICY / [tool.ctune] over the spec's policy
        l2_policy=cfg.l2_policy or None,
        energy=energy,
        quantile=quantile,
        timeout_s=timeout,
        min_samples=samples,
        max_samples=samples,
    )
    validate(plan)
    if vendor and spec.vendor_path is None:
        raise UserError(
            f"--vendor: {spec.yaml_path.name} names no vendor call; add "
            "`vendor: {python: FILE.py:FUNCTION, name: TEXT}` (docs/spec-format.md)"
        )
    if not gpu_available(device):  # input checked, nothing compiled yet
        raise ToolchainError(
            f"ctune bench needs a CUDA GPU (device {device} is not visible; run `ctune "
            "doctor`); nothing was compiled. `ctune compile` works without one"
        )
    if energy:
        from ctune.measure.nvml_energy import require_nvml

        require_nvml(device)
    with NvccCompiler.from_settings(spec, toolchain, cfg) as compiler:
        build = compiler.build(candidate, chosen)
    if not build.outcome.is_ok:
        render_bench.bench_report(spec, chosen, candidate, build, None, plan, out)
        raise UserError(
            f"{spec.source_path.name}: candidate {candidate.key()} did not build: "
            f"{build.outcome.value}"
        )
    with WorkerMeasurer(device, cfg) as measurer:
        measurement = measurer.measure(spec, candidate, build, chosen, plan)
        against = None
        if vendor:
            from ctune.measure.vendor import vendor_build, vendor_candidate

            measurer.restart()  # its library's state stays out of the candidate's process
            against = measurer.measure(
                spec, vendor_candidate(spec), vendor_build(spec), chosen, plan
            )
    render_bench.bench_report(spec, chosen, candidate, build, measurement, plan, out, against)
    if not measurement.outcome.is_ok:
        raise CandidateFailed(
            f"candidate {candidate.key()} on {chosen.name}: {measurement.outcome.value} "
            "(evidence above)"
        )
