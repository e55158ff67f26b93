"""``ctune search``: parse, resolve settings, run a ``SearchSession``, render, return.

No search logic lives here . Test hooks: the three factories
below (:func:`load_kernel`, :func:`make_compiler`, :func:`make_measurer`)
are the GPU and toolchain boundary; CLI tests monkeypatch them to return
stand-ins (``ctune.testing.standins``), as fastapi-cli's tests patch
``uvicorn.run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctune.cli import app, complete
from ctune.cli.options import (
    FormatOpt,
    JsonOpt,
    KernelArg,
    NvccOpt,
    ProblemOpt,
    PtxasOpt,
    ReportFormat,
    in_panel,
    output_format,
    parse_duration,
)
from ctune.errors import SearchInconclusive, UserError
from ctune.search import strategy_names_help
from ctune.search.options import WARM_START_SHARE, share_of_budget
from ctune.search.pruning import DEFAULT_PRUNE_MARGIN, DEFAULT_SEARCH_REP_MS

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.spec import KernelSpec


# --- test hooks: the toolchain and GPU boundary --------------------------------------------


def load_kernel(kernel: Path, cfg: Settings) -> tuple[KernelSpec, Any]:
    """The spec and the probed toolchain (nvcc)."""
    from ctune.cli.common import load

    return load(kernel, cfg)


def make_compiler(spec: KernelSpec, toolchain: Any, cfg: Settings) -> Any:
    """nvcc here, or compile tasks on the engine (``--executor``)."""
    from ctune.search.session import compiler_for

    return compiler_for(spec, toolchain, cfg)


def make_measurer(cfg: Settings) -> Any:
    """None for GPU 0 here: the service creates it itself, after its capability checks;
    else the engine's GPU workers (``--executor``, ``--gpus``) or another local GPU."""
    from ctune.search.session import measurer_for

    return measurer_for(cfg)


# --- the command -------------------------------------------------------------------------------


#: the panels of `ctune search --help`, in the order a reader needs them
_SEARCH = "Search"
_BUDGET = "Budget and stopping"
_MEASURE = "Measurement (docs/search.md)"
_BUILD = "Build"
_OUTPUT = "Output and resuming"
_SET = "Problem sets (docs/dispatch.md)"
_SCALE = "Scale-out (docs/scale-out.md)"


def _check_outputs(out: Path | None, plot: Path | None) -> None:
    """``--out`` and ``--plot``, which are written when the search is done, checked before
    it starts (a folder, a FIFO nobody reads, a format matplotlib lacks: one line, exit 2)."""
    from ctune.cli import render_search
    from ctune.writes import check_output

    if plot is not None:
        render_search.check_plot_path(plot)
    if out is not None:
        check_output(out, "--out")


@app.command("search")
def search_command(
    kernel: KernelArg,
    objective: Annotated[
        list[str],
        typer.Option(
            "--objective",
            "-O",
            help="what to optimise: a term (p99) or a weighted sum ('0.7*p50 + 0.3*p99'); "
            "repeat for a Pareto search; terms: docs/search.md, or press TAB",
            autocompletion=complete.objective_terms,
            rich_help_panel=_SEARCH,
        ),
    ],
    constraint: Annotated[
        list[str] | None,
        typer.Option(
            "--constraint",
            "-C",
            help="TERM OP NUMBER[UNIT], e.g. 'power<=400W', 'p99<2ms'; repeatable; units: "
            "docs/search.md",
            rich_help_panel=_SEARCH,
        ),
    ] = None,
    problem: Annotated[str | None, in_panel(ProblemOpt, _SEARCH)] = None,
    strategy: Annotated[
        str | None,
        typer.Option(
            help=f"{strategy_names_help()} (default auto; on --resume the journal's)",
            autocompletion=complete.strategy_names,
            rich_help_panel=_SEARCH,
        ),
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option",
            help="a strategy option, NAME=VALUE; repeatable; options: docs/search.md",
            rich_help_panel=_SEARCH,
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            help="RNG seed (default 0; on --resume the journal's)",
            rich_help_panel=_SEARCH,
        ),
    ] = None,
    warm_start: Annotated[
        Path | None,
        typer.Option(
            "--warm-start",
            help="T4 results file, best measured first",
            rich_help_panel=_SEARCH,
        ),
    ] = None,
    warm_start_share: Annotated[
        float,
        typer.Option(
            "--warm-start-share",
            help=f"its share of --budget, (0, 1] (default {WARM_START_SHARE:g}; 1: all of it)",
            show_default=False,
            rich_help_panel=_SEARCH,
        ),
    ] = WARM_START_SHARE,
    device_genes: Annotated[
        str | None,
        typer.Option(
            "--device-genes",
            help="also tune clocks, power_limit (root) or none; default: the spec's",
            rich_help_panel=_SEARCH,
        ),
    ] = None,
    acf: Annotated[
        str | None,
        typer.Option(
            "--acf",
            help="also tune advanced-controls files: ptxas, nvcc, ptxas,nvcc or none; "
            "default: the spec's",
            rich_help_panel=_SEARCH,
        ),
    ] = None,
    acf_variant: Annotated[
        str,
        typer.Option(
            "--acf-variant",
            help="controls space: default, or att (attention kernels)",
            show_default=False,
            rich_help_panel=_SEARCH,
        ),
    ] = "default",
    budget: Annotated[
        int | None,
        typer.Option(
            help="distinct binaries measured (default: the spec's default_budget, else 100, "
            "unless --time; docs/search.md)",
            rich_help_panel=_BUDGET,
        ),
    ] = None,
    time: Annotated[
        str | None,
        typer.Option("--time", help="wall-time budget: 30m, 1h30m, 90s", rich_help_panel=_BUDGET),
    ] = None,
    patience: Annotated[
        int | None,
        typer.Option(
            help="stop after this many generations without improvement", rich_help_panel=_BUDGET
        ),
    ] = None,
    fill: Annotated[
        bool | None,
        typer.Option(
            "--fill/--no-fill",
            help="measure runtime-gene variants while builds compile (default on)",
            show_default=False,
            rich_help_panel=_BUDGET,
        ),
    ] = None,
    cost_model: Annotated[
        str | None,
        typer.Option(
            "--cost-model",
            help="on: skip builds a model says cannot beat the leader (default: on "
            "after an earlier search; docs/cost-model.md)",
            show_default=False,
            rich_help_panel=_BUDGET,
        ),
    ] = None,
    l2_policy: Annotated[
        str | None,
        typer.Option(
            "--l2-policy",
            "--l2",
            help="cold (flush L2 per sample) or hot",
            rich_help_panel=_MEASURE,
        ),
    ] = None,
    timing: Annotated[
        str | None,
        typer.Option(
            help="a sample is one launch (events), a graph replay (graph) or auto",
            rich_help_panel=_MEASURE,
        ),
    ] = None,
    confirm_processes: Annotated[
        int,
        typer.Option(
            help="most fresh processes re-measuring the leader and baseline (default 5; 0: skip)",
            show_default=False,
            rich_help_panel=_MEASURE,
        ),
    ] = 5,
    no_vendor: Annotated[
        bool,
        typer.Option(
            "--no-vendor",
            help="skip timing the vendor (cuBLAS, SDPA)",
            show_default=False,
            rich_help_panel=_MEASURE,
        ),
    ] = False,
    prune_margin: Annotated[
        str,
        typer.Option(
            help=f"stop a candidate this far behind the leader (default "
            f"{DEFAULT_PRUNE_MARGIN:.0%}; off: never)",
            show_default=False,
            rich_help_panel=_MEASURE,
        ),
    ] = f"{DEFAULT_PRUNE_MARGIN:.0%}",
    search_rep_ms: Annotated[
        str,
        typer.Option(
            help=f"GPU ms each candidate is sampled for (default {DEFAULT_SEARCH_REP_MS:g}; "
            "full: the protocol's rep_ms)",
            show_default=False,
            rich_help_panel=_MEASURE,
        ),
    ] = f"{DEFAULT_SEARCH_REP_MS:g}",
    arch: Annotated[
        str | None,
        typer.Option(help="target, e.g. sm_90 (default: the spec's)", rich_help_panel=_BUILD),
    ] = None,
    nvcc: Annotated[str | None, in_panel(NvccOpt, _BUILD)] = None,
    ptxas: Annotated[str | None, in_panel(PtxasOpt, _BUILD)] = None,
    jobs: Annotated[
        int | None,
        typer.Option(help="parallel compiles (default: CPUs)", rich_help_panel=_BUILD),
    ] = None,
    relink: Annotated[
        str | None,
        typer.Option(
            metavar="auto|on|off",
            help="ptxas variants from a kept front end (auto)",
            rich_help_panel=_BUILD,
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="continue the search of this journal (its strategy, seed and budgets)",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    journal: Annotated[
        Path | None,
        typer.Option(
            help="where a new journal goes (default <cache_dir>/journals/...)",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="result file (default: <kernel>-<problem>.json in <cache_dir>/results)",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    commit: Annotated[
        bool,
        typer.Option(
            "--commit/--no-commit",
            help="commit the front to the registry (default: no)",
            show_default=False,
            rich_help_panel=_OUTPUT,
        ),
    ] = False,
    fmt: Annotated[ReportFormat, in_panel(FormatOpt, _OUTPUT)] = ReportFormat.table,
    json_out: JsonOpt = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="a figure of the front: .png, .pdf, .svg (pip install 'ctune\\[plot]')",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    problem_set: Annotated[
        str | None,
        typer.Option(
            "--problem-set",
            help="search each shape, then a dispatch table",
            autocompletion=complete.problem_set_names,
            rich_help_panel=_SET,
        ),
    ] = None,
    set_dir: Annotated[
        Path | None,
        typer.Option(
            help="the set's state (default <cache_dir>/sets/<kernel>-<set>)",
            rich_help_panel=_SET,
        ),
    ] = None,
    dispatch_margin: Annotated[
        str,
        typer.Option(
            help="a build covers a shape within this of its best (default 3%)",
            show_default=False,
            rich_help_panel=_SET,
        ),
    ] = "3%",
    dispatch_shipped: Annotated[
        list[Path] | None,
        typer.Option(
            "--dispatch-shipped",
            help="a dispatch table (JSON) of builds shipped already, used first; repeatable",
            rich_help_panel=_SET,
        ),
    ] = None,
    dispatch_vendor: Annotated[
        bool,
        typer.Option(
            "--dispatch-vendor",
            help="the vendor call (cuBLAS, SDPA) as a build",
            rich_help_panel=_SET,
        ),
    ] = False,
    step_time: Annotated[
        str | None,
        typer.Option(
            help="wall time for this call (e.g. 8m); the next call goes on",
            rich_help_panel=_SET,
        ),
    ] = None,
    cross_processes: Annotated[
        int,
        typer.Option(
            help="fresh processes per shape in the cross step (default 1)",
            show_default=False,
            rich_help_panel=_SET,
        ),
    ] = 1,
    reuse_share: Annotated[
        float,
        typer.Option(
            help=f"share of a shape's budget first spent on its group's earlier builds "
            f"(default {WARM_START_SHARE:g})",
            show_default=False,
            rich_help_panel=_SET,
        ),
    ] = WARM_START_SHARE,
    executor: Annotated[
        str | None,
        typer.Option(
            help="local (default), dask, auto or a Dask scheduler's address",
            rich_help_panel=_SCALE,
        ),
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option(help="GPUs that measure: all or 0,1 (default 0)", rich_help_panel=_SCALE),
    ] = None,
) -> None:
    """Search flags, launch configuration and template parameters for the best builds.

    Example: ctune search kernels/gemm.cu --objective p99 --objective energy
    --constraint "power<=400W" --budget 200. Prints the journal path first (resume
    with --resume JOURNAL), re-measures the front and the default build in fresh
    processes, and writes a result file that `ctune registry import` accepts.
    """
    from ctune.cli import render_search
    from ctune.cli.common import offer_controls, settings
    from ctune.controls.offer import parse_acf_option, relink_hint
    from ctune.controls.setup import controls_setup
    from ctune.objective import parse_objective_spec
    from ctune.registry.assemble import ResultPublisher
    from ctune.search import driver
    from ctune.search.cost_policy import parse_on_off
    from ctune.search.driver import SearchOptions
    from ctune.search.pruning import parse_prune_margin, parse_search_rep
    from ctune.search.session import SearchSession
    from ctune.search.strategy import parse_option_items

    report_fmt = output_format(fmt, json_out)
    time_s = parse_duration(time, "--time") if time else None
    step_s = parse_duration(step_time, "--step-time") if step_time else None
    if problem_set is None:  # before anything runs: a search must not end in a refused output
        _check_outputs(out, plot)
    cfg = settings(
        jobs=jobs,
        l2_policy=l2_policy,
        arch=arch,
        timing=timing,
        executor=executor,
        gpus=gpus,
        nvcc=nvcc,
        ptxas=ptxas,
        relink=relink,
    )
    share_of_budget(warm_start_share, "--warm-start-share")
    seeds: tuple[dict[str, Any], ...] = ()
    if warm_start is not None:
        from ctune.exchange.t4 import read_t4

        seeds = tuple(read_t4(warm_start))
    asked_acf = parse_acf_option(acf)
    spec, toolchain = load_kernel(kernel, cfg)
    spec = offer_controls(spec, toolchain, cfg, asked_acf)
    hint = relink_hint(spec, cfg.relink)
    if hint is not None:
        from ctune.cli.render import note_line

        note_line(hint)
    objectives = parse_objective_spec(objective, constraint or [], spec.metrics)
    options = SearchOptions(
        problem=problem,
        strategy=strategy,
        strategy_options=parse_option_items(option or []),
        budget=budget,
        time_s=time_s,
        patience=patience,
        seed=seed,
        resume=resume,
        journal=journal,
        confirm_processes=confirm_processes,
        vendor=not no_vendor,
        prune_margin=parse_prune_margin(prune_margin),
        search_rep_ms=parse_search_rep(search_rep_ms),
        fill=fill,
        cost_model=parse_on_off(cost_model, "--cost-model"),
        warm_start=seeds,
        warm_start_source=str(warm_start or ""),
        warm_start_share=warm_start_share,
        controls=controls_setup(
            spec.acf,
            toolchain,
            cache_dir=cfg.cache_dir,
            spaces_folder=cfg.acf_spaces,
            variant=acf_variant,
        ),
    )
    if problem_set is None and (dispatch_vendor or dispatch_shipped):
        flag = "--dispatch-vendor" if dispatch_vendor else "--dispatch-shipped"
        raise UserError(f"{flag} shapes a problem set's dispatch table; add --problem-set NAME")
    control = None  # after parsing every flag: opening device genes needs the GPU (exit 3)
    wanted = device_genes if device_genes is not None else ",".join(spec.device_genes)
    if wanted and wanted.strip().lower() != "none":
        from ctune.cli.search_device import open_device_genes

        spec, control = open_device_genes(wanted, spec, cfg, problem_set, objectives, options)
    compiler = make_compiler(spec, toolchain, cfg)
    if problem_set is not None:
        from ctune.cli.search_set import SetArgs, run_set

        given: dict[str, Any] = {"--problem": problem, "--resume": resume, "--out": out}
        given.update({"--journal": journal, "--commit": commit or None, "--plot": plot})
        set_args = SetArgs(
            problem_set,
            set_dir,
            dispatch_margin,
            step_s,
            cross_processes,
            reuse_share,
            tuple(dispatch_shipped or ()),
            dispatch_vendor,
        )
        run_set(
            cfg,
            spec,
            objectives,
            options,
            set_args,
            given,
            compiler,
            make_measurer(cfg),
            report_fmt,
        )
        return
    measurer = None
    display = render_search.SearchDisplay(report_fmt)
    try:
        if control is not None:
            from ctune.cli.search_device import device_measurer

            measurer, control = device_measurer(cfg, control), None  # it closes the control
        else:
            measurer = make_measurer(cfg)
        session = SearchSession(
            cfg,
            spec,
            objectives,
            options,
            compiler=compiler,
            measurer=measurer,
            toolchain=toolchain,
            publish=ResultPublisher(cfg.registry, Path(cfg.cache_dir), out, commit),
        )
        with display:
            result = driver.run_session(session, display.handle)
    finally:
        for part in (measurer, compiler, control):
            if part is not None:
                part.close()
    render_search.final_report(result, report_fmt)
    if plot is not None:
        render_search.plot_front(result, plot, report_fmt)
    if result.interrupted:  # after the report: main() ends with what the journal keeps
        from ctune.interrupts import Interrupted
        from ctune.search.journal_writer import kept_line

        raise Interrupted(kept_line(result.journal, result.evaluations, result.confirmation_rounds))
    if result.inconclusive:
        why = (
            "the default build beats every build the constraints allow"
            if result.feasibility is not None and result.feasibility.dominated
            else "no measured candidate meets the constraints"
        )
        raise SearchInconclusive(f"search inconclusive: {why}; nothing pinned (report above)")
