"""``ctune check``: is each artifact still valid for this machine and these sources?

CI runs ``ctune check`` (or ``ctune check --pinned --strict``) on the
GPU-less compile machine: exit 0 when every artifact is fresh (soft changes
only warn), 1 when any is stale, 2 when an artifact file cannot be read or a kernel's spec
is not found, 3 when nvcc is missing. GPU fields are checked only where a GPU is found, and
only for artifacts measured on a GPU of its class (a registry holds several GPUs'
artifacts). Quiet by default: stale artifacts in full, the drift of the rest one line per
kind, a summary line; ``-v`` names every artifact.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctune.cli import app
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
from ctune.config import Settings
from ctune.errors import GateFailure

if TYPE_CHECKING:
    from ctune.cli import render_registry as render
else:  # loaded when the command runs, not when --help lists it
    render = lazy_module("ctune.cli.render_registry")


def probe_for(cfg: Settings, kernels: Path, *, gpu: bool) -> Any:
    """This machine's identity with the arch, L2 policy and sampling settings a search
    with these settings would record (so a changed warm-up or timing budget is seen); each
    artifact checked with the toolchain it recorded where this machine has it (with the
    default choice of toolchain), its controls files found in the cache's and the
    registry's stores."""
    from ctune.ci.check import FingerprintProbe
    from ctune.ci.check_toolchain import ToolchainFinder
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.controls.store import StoreChain

    plan = {
        "warmup_ms": cfg.warmup_ms,
        "rep_ms": cfg.rep_ms,
        "energy_window_s": cfg.energy_window_s,
    }
    return FingerprintProbe(
        kernels,
        gpu=gpu,
        nvcc=nvcc_for(cfg),
        arch=cfg.arch or None,
        l2_policy=cfg.l2_policy or None,
        plan=plan,
        toolchains=ToolchainFinder.for_settings(cfg),
        controls=StoreChain.for_settings(cfg),
    )


@app.command("check")
def check_command(
    pinned: Annotated[bool, typer.Option("--pinned", help="only pinned artifacts")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="soft changes fail too")] = False,
    gpu: Annotated[
        bool, typer.Option("--gpu/--no-gpu", help="probe the GPU (NVML) when there is one")
    ] = True,
    registry: Annotated[Path | None, typer.Option("--registry", help="registry directory")] = None,
    kernels: KernelsOpt = None,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild/--no-rebuild",
            help="when build inputs changed, rebuild the members and compare SASS "
            "(without it such artifacts are stale)",
        ),
    ] = True,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="every artifact with every reason (default: the stale ones; "
            "the drift of the rest, one line per kind)",
        ),
    ] = False,
    fmt: RowsFormatOpt = RowsFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Is each artifact still what would be built and measured here? Names every reason."""
    from ctune.ci.check import check_registry, nvcc_verifier
    from ctune.evidence import identity as fingerprint
    from ctune.registry.store import fail_if_unreadable, require_registry

    out = output_format(fmt, json_out)
    cfg = resolve_settings({"registry": registry, "kernels": kernels, "nvcc": nvcc, "ptxas": ptxas})
    require_registry(cfg.registry)
    probe = probe_for(cfg, cfg.kernels, gpu=gpu)
    verify = nvcc_verifier(cfg) if rebuild else None
    report = check_registry(cfg.registry, probe, pinned_only=pinned, verify=verify)
    here = [r for r in report.results if not r.other_gpu]
    unchecked = sorted({n for r in here for n in r.not_checked})
    not_checked = (
        fingerprint.not_checked_reason(unchecked, report.gpu_probed),
        fingerprint.not_checked_reason(unchecked, report.gpu_probed, brief=True),
    )
    if out == "table":
        render.check(report, strict, not_checked, verbose=verbose)
    else:
        _report_for_programs(report, strict, not_checked[0], out)
    stale = sum(r.verdict(strict) == "stale" for r in report.results)
    failed = (
        f"{stale} of {len(report.results)} artifact(s) stale" if report.exit_code(strict) else None
    )
    fail_if_unreadable(report.quarantined, failed)
    if failed:
        raise GateFailure(failed)


def _report_for_programs(report: Any, strict: bool, not_checked: str, fmt: str) -> None:
    """``--format json|csv``: every verdict with its reasons (unreadable files are warnings
    on stderr, and in the JSON)."""
    from ctune.cli.render import report as emit
    from ctune.cli.verdict_documents import check_document, check_rows

    render.quarantined(report.quarantined)
    emit(
        fmt,
        lambda: check_document(report, strict, not_checked),
        lambda: None,
        lambda: check_rows(report, strict),
    )
