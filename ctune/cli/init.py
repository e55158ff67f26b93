"""``ctune init KERNEL.cu``: draft the YAML sidecar and a reference stub from the kernel."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ctune.cli import app, complete
from ctune.cli.options import FormatOpt, JsonOpt, ReportFormat, output_format
from ctune.errors import UserError


@app.command("init")
def init_command(
    kernel: Annotated[
        Path,
        typer.Argument(
            help="the kernel's .cu file, as its author wrote it",
            autocompletion=complete.kernel_paths,
        ),
    ],
    entry: Annotated[
        str | None,
        typer.Option(
            help="the kernel to tune when the file has several: its name, or an overload "
            'with its parameter list ("add(float*, const float*, int)")'
        ),
    ] = None,
    include_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--include-dir",
            "-I",
            help="a folder the kernel's includes are found in, as nvcc -I takes it; "
            "recorded as the spec's include_dirs (repeat it for several)",
        ),
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option(
            help="target the draft compiles for, e.g. sm_90a; recorded in the draft "
            "(default: the setting, else sm_90)"
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="overwrite an existing sidecar and reference")
    ] = False,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Draft KERNEL.yaml and KERNEL_ref.py next to the kernel: entry, args from the
    signature, genes from the macros it reads but does not define (#ifndef NAME, or used
    bare), a problem and a reference stub. `ctune space KERNEL.cu` runs on the draft as it
    is; every guess is marked '# check:' for you to confirm."""
    from ctune import arch as arches
    from ctune.cli import render_kernel
    from ctune.cli.common import settings
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.compile.toolchain import offered_arch, probe_toolchain
    from ctune.spec.draft.guess import default_for
    from ctune.spec.draft.includes import read_with_includes
    from ctune.spec.draft.sidecar import check_loads, draft_sidecar, pick_kernel, reference_name
    from ctune.spec.draft.source import read_source
    from ctune.spec.draft.undefined import find_undefined

    out = output_format(fmt, json_out)
    include_dirs = [d.resolve() for d in include_dir or ()]
    for folder in include_dirs:
        if not folder.is_dir():
            raise UserError(f"--include-dir {folder}: not a directory; give a folder, as -I")
    included = read_with_includes(kernel, include_dirs)
    source = read_source(included.text, included.headers)
    pick_kernel(source, entry, kernel.name)  # a file without kernels fails before nvcc runs
    yaml_path = kernel.with_suffix(".yaml")
    reference = kernel.parent / reference_name(kernel.stem)
    _check_targets((yaml_path, reference), force)
    cfg = settings(arch=arch)
    toolchain = probe_toolchain(nvcc_for(cfg))
    where = "arch (--arch, CTUNE_ARCH or [tool.ctune])" if cfg.arch else "the default arch"
    target = offered_arch(cfg.arch or arches.DEFAULT, where, toolchain)
    probe = find_undefined(
        toolchain.nvcc,
        kernel,
        arch=target,
        std="c++17",
        defines={},
        include_dirs=include_dirs,
        guess=default_for,
        called=source.called,
        timeout_s=cfg.compile_timeout_s,
    )
    here = kernel.resolve().parent
    draft = draft_sidecar(
        source,
        stem=kernel.stem,
        source_name=kernel.name,
        entry=entry,
        probe=probe,
        include_dirs=[os.path.relpath(d, here) for d in include_dirs],
        arch=target,
    )
    if not probe.builds:
        draft.checks.insert(0, f"{kernel.name} does not compile alone: {probe.error}")
    check_loads(draft, kernel, toolchain.help_text)  # the draft loads as it is, or nothing
    from ctune.writes import write_all_or_none

    write_all_or_none(((yaml_path, draft.yaml), (reference, draft.reference)))
    render_kernel.init_report(yaml_path, reference, draft, out, source=kernel)


def _check_targets(paths: tuple[Path, ...], force: bool) -> None:
    """Before anything runs, each file the draft goes to: a folder there is refused (even
    with --force), an existing file unless --force; so that both are written or neither."""
    for path in paths:
        if path.is_dir():
            raise UserError(f"{path}: a folder where the draft's file goes; move it away")
        if os.path.lexists(path) and not force:
            raise UserError(f"{path}: already exists; pass --force to overwrite it")
