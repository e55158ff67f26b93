"""``ctune gate``: on the GPU machine, re-measure pinned artifacts and decide.

Verdicts and exit codes: PASS/IMPROVED 0, REGRESSED or STALE 1,
INCONCLUSIVE 4 (never forced into pass or fail), 3 without a GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ctune.cli import app, complete
from ctune.cli.invocation import resolve_settings
from ctune.cli.lazy import lazy_module
from ctune.cli.options import (
    JsonOpt,
    KernelsOpt,
    NvccOpt,
    PtxasOpt,
    RowsFormat,
    RowsFormatOpt,
    output_format,
)
from ctune.cli.registry import KEYS_HELP
from ctune.errors import (
    EXIT_GATE_FAILED,
    GateFailure,
    GateInconclusive,
    ToolchainError,
    UserError,
)
from ctune.evidence.noise_rule import NoiseRule, threshold_problem

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ctune.ci.check import FingerprintProbe
    from ctune.cli import render_registry as render
    from ctune.config import Settings
    from ctune.registry.layout import ArtifactKey
    from ctune.registry.schema import Artifact
else:  # loaded when the command runs, not when --help lists it
    render = lazy_module("ctune.cli.render_registry")

_RULE = NoiseRule()  # the search's confirmation uses the same rule and defaults


@app.command("gate")
def gate_command(
    keys: Annotated[
        list[str] | None,
        typer.Argument(
            help=f"{KEYS_HELP} (default: every pinned one)", autocompletion=complete.registry_keys
        ),
    ] = None,
    processes: Annotated[int, typer.Option(help="separate measuring processes (k >= 3)")] = 3,
    strict: Annotated[bool, typer.Option("--strict", help="soft changes count as stale")] = False,
    floor: Annotated[float, typer.Option(help="smallest threshold T (fraction)")] = _RULE.floor,
    cv_factor: Annotated[float, typer.Option(help="T = max(floor, this x CV)")] = _RULE.cv_factor,
    max_threshold: Annotated[
        float, typer.Option(help="INCONCLUSIVE when T exceeds this (fraction)")
    ] = _RULE.max_threshold,
    alpha: Annotated[
        float, typer.Option(help="false-alarm budget per run (split per test)")
    ] = _RULE.alpha,
    canary: Annotated[bool, typer.Option(help="also re-measure the default build")] = True,
    confirm: Annotated[bool, typer.Option(help="re-measure to confirm a regression")] = True,
    vendor: Annotated[
        bool,
        typer.Option(
            "--vendor", help="also time each spec's vendor call (cuBLAS, SDPA); slower fails"
        ),
    ] = False,
    registry: Annotated[Path | None, typer.Option("--registry", help="registry directory")] = None,
    kernels: KernelsOpt = None,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    build_only: Annotated[
        bool,
        typer.Option(
            "--build-only",
            help="build what the gate would measure into the build cache and stop (no GPU): "
            "compile on a CPU runner, carry the cache (CTUNE_CACHE_DIR) to the GPU runner",
        ),
    ] = False,
    fmt: RowsFormatOpt = RowsFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Re-measure pinned artifacts in k processes: PASS/REGRESSED/IMPROVED/INCONCLUSIVE."""
    from ctune.ci.gate import exit_code
    from ctune.ci.gate_run import RebuildingRemeasurer, run_gate
    from ctune.cli import verdict_documents as documents
    from ctune.cli.check import probe_for
    from ctune.cli.render import report
    from ctune.evidence import identity as fingerprint
    from ctune.registry.store import ArtifactStore, fail_if_unreadable, require_registry

    if processes < 3:
        raise UserError(f"--processes {processes}: the gate needs k >= 3 processes")
    _check_thresholds(floor=floor, cv_factor=cv_factor, max_threshold=max_threshold, alpha=alpha)
    out = output_format(fmt, json_out)
    cfg = resolve_settings({"registry": registry, "kernels": kernels, "nvcc": nvcc, "ptxas": ptxas})
    require_registry(cfg.registry)
    store = ArtifactStore(cfg.registry)
    listing = store.select(keys) if keys else store.list()
    render.quarantined(listing.quarantined)
    chosen = [(k, a) for k, a in listing.artifacts if keys or a.pinned is not None]
    if build_only:
        failure = _build_only(cfg, cfg.kernels, chosen, canary, out)
        fail_if_unreadable(listing.quarantined, failure)
        if failure:
            raise GateFailure(failure)
        return
    probe = probe_for(cfg, cfg.kernels, gpu=True)
    if not probe.gpu_probed:
        raise ToolchainError("ctune gate needs a GPU (NVML found none); use `ctune check` here")
    chosen = _of_this_gpu(chosen, probe, out)
    comparisons = max(1, len(chosen)) * (1 + canary + vendor)
    rule = NoiseRule(
        min_processes=_RULE.min_processes,
        floor=floor,
        cv_factor=cv_factor,
        max_threshold=max_threshold,
        alpha=alpha / comparisons,
    )
    with RebuildingRemeasurer(cfg, cfg.kernels, vendor=vendor) as remeasurer:
        reports = run_gate(
            chosen,
            probe.for_artifact,
            remeasurer,
            rule=rule,
            processes=processes,
            canary=canary,
            confirm_failures=confirm,
            strict=strict,
            on_report=render.gate_progress(len(chosen), out),
            build_ahead=remeasurer.build_ahead,
        )
    unchecked = sorted({n for r in reports for n in r.not_checked})
    not_checked = fingerprint.not_checked_reason(unchecked, True)
    report(
        out,
        lambda: documents.gate_document(reports, not_checked),
        lambda: render.gate(reports, not_checked),
        lambda: documents.gate_rows(reports),
    )
    code = exit_code(reports)
    summary = ", ".join(
        f"{sum(r.verdict is v for r in reports)} {v.value}"
        for v in sorted({r.verdict for r in reports}, key=lambda v: v.value)
    )
    failure = f"gate {'failed' if code == EXIT_GATE_FAILED else 'inconclusive'}: {summary}"
    fail_if_unreadable(listing.quarantined, failure if code else None)
    if code == EXIT_GATE_FAILED:
        raise GateFailure(failure)
    if code:
        raise GateInconclusive(failure)


def _check_thresholds(
    *, floor: float, cv_factor: float, max_threshold: float, alpha: float
) -> None:
    """Refuse a threshold option out of its range (NoiseRule's limits) in one line, before
    anything is read, built or measured: ``--floor nan`` would decide every comparison."""
    given = {"floor": floor, "cv_factor": cv_factor, "max_threshold": max_threshold, "alpha": alpha}
    for name, value in given.items():
        problem = threshold_problem(name, value)
        if problem:
            raise UserError(f"--{name.replace('_', '-')} {value:g}: {problem}")
    # and what they say together (a floor at the largest threshold)
    NoiseRule(floor=floor, cv_factor=cv_factor, max_threshold=max_threshold, alpha=alpha)


def _of_this_gpu(
    chosen: Sequence[tuple[ArtifactKey, Artifact]], probe: FingerprintProbe, fmt: str = "table"
) -> list[tuple[ArtifactKey, Artifact]]:
    """The selected artifacts measured on a GPU of this one's class (``probe.of_this_gpu``):
    another GPU's timings say nothing about this one (a registry holds several GPUs'
    artifacts; CI gates each on its own runner). Says what it leaves out; none left is one
    line, exit 2."""
    here = probe.device_class
    mine = [(k, a) for k, a in chosen if probe.of_this_gpu(a)]
    others = sorted({a.device_class for _, a in chosen if not probe.of_this_gpu(a)})
    if others and mine:
        render.other_gpus(len(chosen) - len(mine), others, "gate: left out", fmt)
    if chosen and not mine:
        raise UserError(
            f"no selected artifact was measured on this GPU ({here}): they are of "
            f"{', '.join(others)}; gate them on that GPU, or select this GPU's, e.g. "
            f"'*/*/{here}'"
        )
    return mine


def _build_only(
    cfg: Settings,
    kernels: Path,
    chosen: Sequence[tuple[ArtifactKey, Artifact]],
    canary: bool,
    fmt: str = "table",
) -> str | None:
    """``--build-only``: compile what the gate would measure; what cannot be is the
    failure returned (exit 1 by the caller), else None."""
    from ctune.ci.gate_run import RebuildingRemeasurer, prebuild_gate
    from ctune.cli import verdict_documents as documents
    from ctune.cli.render import report

    with RebuildingRemeasurer(cfg, kernels) as builder:
        reports = prebuild_gate(
            chosen, builder, canary=canary, on_report=render.prebuild_progress(len(chosen), fmt)
        )
    if fmt != "table":  # the table is the progress lines themselves
        report(
            fmt,
            lambda: documents.prebuild_document(reports),
            lambda: None,
            lambda: documents.prebuild_rows(reports),
        )
    failed = [r for r in reports if not r.ok]
    if not failed:
        return None
    return (
        f"gate --build-only: {len(failed)} of {len(reports)} artifact(s) cannot be built "
        f"as recorded (see above); the gate would call them STALE or REGRESSED"
    )
