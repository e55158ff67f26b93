"""``ctune search``: parse, resolve settings, call ``run_search``, render, return.

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
from ctune.cli.options import KernelArg, NvccOpt, ProblemOpt, PtxasOpt, parse_duration
from ctune.errors import SearchInconclusive
from ctune.search import strategy_names_help
from ctune.search.budget import WARM_START_SHARE
from ctune.search.pruning import DEFAULT_PRUNE_MARGIN, DEFAULT_SEARCH_REP_MS

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.spec import KernelSpec


def _objective_help() -> str:
    from ctune.objective.spec import help_text

    return (
        "what to optimise; repeat for a Pareto search (2-3 objectives). A term (p99) or a "
        "weighted sum of same-direction terms ('0.7*p50 + 0.3*p99'). " + help_text()
    )


def _strategy_help() -> str:
    from ctune.search import options_help

    return "search strategy options, NAME=VALUE; repeatable. " + options_help().replace("\n", " | ")


# --- test hooks: the toolchain and GPU boundary --------------------------------------------


def load_kernel(kernel: Path, cfg: Settings) -> tuple[KernelSpec, Any]:
    """The spec and the probed toolchain (nvcc)."""
    from ctune.cli.common import load

    return load(kernel, cfg)


def make_compiler(spec: KernelSpec, toolchain: Any, cfg: Settings) -> Any:
    """nvcc here, or compile tasks on the engine (``--executor``)."""
    from ctune.scale import compiler_for

    return compiler_for(spec, toolchain, cfg)


def make_measurer(cfg: Settings) -> Any:
    """None for GPU 0 here: the service creates it itself, after its capability checks;
    else the engine's GPU workers (``--executor``, ``--gpus``) or another local GPU."""
    from ctune.scale import measurer_for

    return measurer_for(cfg)


# --- the command -------------------------------------------------------------------------------


@app.command("search")
def search_command(
    kernel: KernelArg,
    objective: Annotated[
        list[str],
        typer.Option(
            "--objective",
            "-O",
            help=_objective_help(),
            autocompletion=complete.objective_terms,
        ),
    ],
    constraint: Annotated[
        list[str] | None,
        typer.Option(
            "--constraint",
            "-C",
            help="TERM OP NUMBER[UNIT], e.g. 'power<=400W', 'spills==0', 'regs<=128', 'p99<2ms'; "
            "OP: <= >= < > ==; units W mW kW, J mJ uJ, ms us ns s, TFLOP/s GFLOP/s, GB/s "
            "MB/s TB/s, B KiB KB (a bare number is the term's unit); repeatable",
        ),
    ] = None,
    problem: ProblemOpt = None,
    strategy: Annotated[
        str | None,
        typer.Option(
            help=f"{strategy_names_help()} (default auto; on --resume the journal's)",
            autocompletion=complete.strategy_names,
        ),
    ] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help=_strategy_help())] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            help="GPU measurements: distinct binaries measured, baseline and failed builds "
            "included; a candidate that compiles to a binary already measured reuses that "
            "measurement and does not count, nor do fillers; at most 4 x budget candidates are "
            "compiled (default 100 unless --time; exhaustive: the whole space; on --resume the "
            "journal's)"
        ),
    ] = None,
    time: Annotated[
        str | None, typer.Option("--time", help="wall-time budget: 30m, 1h30m, 90s")
    ] = None,
    patience: Annotated[
        int | None, typer.Option(help="stop after this many generations without improvement")
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            help="RNG seed (same seed, same search; default 0, on --resume the journal's)"
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="continue the search recorded in this journal, with its strategy, options, "
            "seed and budgets (a flag that differs is refused)"
        ),
    ] = None,
    journal: Annotated[
        Path | None,
        typer.Option(help="where a new journal goes (default <cache_dir>/journals/...)"),
    ] = None,
    commit: Annotated[
        bool, typer.Option("--commit/--no-commit", help="commit the front to the registry")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="result file (default <cache_dir>/results/<kernel>-<problem>.json)"),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            metavar="PNG",
            help="write a PNG of the front (needs matplotlib: pip install 'ctune\\[plot]'; "
            "`ctune plot JOURNAL` draws the other figures)",
        ),
    ] = None,
    jobs: Annotated[int | None, typer.Option(help="parallel compiles (default: CPUs)")] = None,
    executor: Annotated[
        str | None,
        typer.Option(
            help="where candidates compile and measure: local (default), dask (a Dask "
            "cluster on this host), auto (Dask's configured scheduler, else local) or a Dask "
            "scheduler address (tcp://host:8786); needs pip install 'ctune\\[cluster]' "
            "(docs/scale-out.md)"
        ),
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option(
            help="GPUs of this host that measure: all or 0,1 (several run through a Dask "
            "cluster started here; default GPU 0)"
        ),
    ] = None,
    l2_policy: Annotated[
        str | None,
        typer.Option("--l2-policy", "--l2", help="cold (flush L2 per sample) or hot"),
    ] = None,
    timing: Annotated[
        str | None,
        typer.Option(
            help="what a sample is: events (one launch), graph (a replay of many launches, "
            "per launch) or auto (graph under 10 us, decided once from the baseline)"
        ),
    ] = None,
    confirm_processes: Annotated[
        int,
        typer.Option(
            help="at most this many fresh processes re-measure the leader and the baseline "
            "(close runners-up and, for several objectives, the front join them); at least 3, "
            "what the registry gate needs, and more only while the comparison is undecided "
            "(0: skip)"
        ),
    ] = 5,
    prune_margin: Annotated[
        str,
        typer.Option(
            help="one objective on latency or throughput: a candidate whose screen (a short "
            "warm-up and ~10 samples) has a median this far above the leader's value stops "
            "there, measured but pruned and not checked (the full sampling plan goes to "
            "candidates that could lead); off: never"
        ),
    ] = f"{DEFAULT_PRUNE_MARGIN:.0%}",
    search_rep_ms: Annotated[
        str,
        typer.Option(
            help="GPU time (ms) each candidate that is not pruned is sampled for during the "
            "search (never under the plan's minimum samples or its quantile's floor); what "
            "the search reports is re-measured with the protocol's full plan in fresh "
            "processes; full: the protocol's rep_ms for every candidate"
        ),
    ] = f"{DEFAULT_SEARCH_REP_MS:g}",
    fill: Annotated[
        bool | None,
        typer.Option(
            "--fill/--no-fill",
            help="while every pending build compiles, measure runtime-gene variants of the "
            "best builds (no compile needed; extra to --budget, bounded by --time; default on)",
            show_default=False,
        ),
    ] = None,
    arch: Annotated[
        str | None, typer.Option(help="target, e.g. sm_90 (default: the spec's)")
    ] = None,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    warm_start: Annotated[
        Path | None,
        typer.Option(
            "--warm-start",
            help="a T4 results file (Kernel Tuner's, or ctune export --as t4): its best "
            "correct configurations are measured first (up to a quarter of the budget; with "
            "--problem-set, --reuse-share of it, after the compile group's earlier builds)",
        ),
    ] = None,
    problem_set: Annotated[
        str | None,
        typer.Option(
            "--problem-set",
            help="search every problem of this set (--budget/--time per problem), measure "
            "each shape's winner on every shape, and write the smallest dispatch set within "
            "--dispatch-margin of each shape's best (resumable: run again to go on)",
            autocompletion=complete.problem_set_names,
        ),
    ] = None,
    set_dir: Annotated[
        Path | None,
        typer.Option(help="the set's state (default <cache_dir>/sets/<kernel>-<set>)"),
    ] = None,
    dispatch_margin: Annotated[
        str, typer.Option(help="--problem-set: a build covers a shape within this of its best")
    ] = "3%",
    dispatch_shipped: Annotated[
        list[Path] | None,
        typer.Option(
            "--dispatch-shipped",
            help="--problem-set: a dispatch table (JSON) whose builds are shipped already; "
            "the cover takes them first and adds builds only for shapes they do not serve "
            "within --dispatch-margin (repeatable)",
        ),
    ] = None,
    step_time: Annotated[
        str | None,
        typer.Option(
            help="--problem-set: wall time for this call (e.g. 8m); stops starting shapes "
            "that would not fit, the next call goes on"
        ),
    ] = None,
    cross_processes: Annotated[
        int, typer.Option(help="--problem-set: fresh processes per shape for the cross step")
    ] = 1,
    reuse_share: Annotated[
        float,
        typer.Option(
            help="--problem-set: share of each shape's --budget first spent on the builds the "
            "earlier shapes of its compile group measured (no compile: cache hits), best first"
        ),
    ] = WARM_START_SHARE,
    device_genes: Annotated[
        str | None,
        typer.Option(
            "--device-genes",
            help="also tune the GPU itself: clocks (a locked SM clock) and/or power_limit, "
            "comma-separated, values read from NVML; set around each measurement and always "
            "restored (needs root on a GPU of your own: refused with exit 3 otherwise); "
            "default: the spec's device_genes; none: without them",
        ),
    ] = None,
    acf: Annotated[
        str | None,
        typer.Option(
            "--acf",
            help="also tune advanced-controls files: ptxas, nvcc or ptxas,nvcc (CUDA 13.3+; "
            "nvcc's needs sm_100+; refused in one line where the toolchain does not take "
            "them), or none; default: the spec's acf",
        ),
    ] = None,
    acf_variant: Annotated[
        str,
        typer.Option(
            "--acf-variant",
            help="which controls search space: default, or att (CompileIQ's space curated "
            "for attention kernels)",
        ),
    ] = "default",
) -> None:
    """Search flags, launch configuration and template parameters for the best builds.

    Example: ctune search kernels/gemm.cu --objective p99 --objective energy
    --constraint "power<=400W" --budget 200. Prints the journal path first (resume
    with --resume JOURNAL), re-measures the front and the default build in fresh
    processes, and writes a result file that `ctune registry import` accepts.
    """
    from ctune.cli import render_search
    from ctune.cli.common import offer_controls, settings
    from ctune.controls.offer import parse_acf_option
    from ctune.controls.setup import controls_setup
    from ctune.objective import parse_objective_spec
    from ctune.registry.assemble import ResultPublisher
    from ctune.search import run_search
    from ctune.search.driver import SearchOptions
    from ctune.search.pruning import parse_prune_margin, parse_search_rep
    from ctune.search.strategy import parse_option_items

    if plot is not None:  # before anything runs: a search must not end in a missing extra
        render_search.require_plotting()
    cfg = settings(
        jobs=jobs,
        l2_policy=l2_policy,
        arch=arch,
        timing=timing,
        executor=executor,
        gpus=gpus,
        nvcc=nvcc,
        ptxas=ptxas,
    )
    seeds: tuple[dict[str, Any], ...] = ()
    if warm_start is not None:
        from ctune.exchange.t4 import read_t4

        seeds = tuple(read_t4(warm_start))
    asked_acf = parse_acf_option(acf)
    spec, toolchain = load_kernel(kernel, cfg)
    spec = offer_controls(spec, toolchain, cfg, asked_acf)
    objectives = parse_objective_spec(objective, constraint or [], spec.metrics)
    options = SearchOptions(
        problem=problem,
        strategy=strategy,
        strategy_options=parse_option_items(option or []),
        budget=budget,
        time_s=parse_duration(time) if time else None,
        patience=patience,
        seed=seed,
        resume=resume,
        journal=journal,
        confirm_processes=confirm_processes,
        prune_margin=parse_prune_margin(prune_margin),
        search_rep_ms=parse_search_rep(search_rep_ms),
        fill=fill,
        warm_start=seeds,
        warm_start_source=str(warm_start or ""),
        controls=controls_setup(
            spec.acf,
            toolchain,
            cache_dir=cfg.cache_dir,
            spaces_folder=cfg.acf_spaces,
            variant=acf_variant,
        ),
    )
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
            step_time,
            cross_processes,
            reuse_share,
            tuple(dispatch_shipped or ()),
        )
        run_set(
            cfg, spec, objectives, options, set_args, given, compiler, make_measurer(cfg), json_out
        )
        return
    measurer = None
    display = render_search.SearchDisplay(json_out=json_out)
    try:
        if control is not None:
            from ctune.cli.search_device import device_measurer

            measurer, control = device_measurer(cfg, control), None  # it closes the control
        else:
            measurer = make_measurer(cfg)
        with display:
            result = run_search(
                cfg,
                spec,
                objectives,
                options,
                compiler=compiler,
                measurer=measurer,
                toolchain=toolchain,
                on_event=display.handle,
                publish=ResultPublisher(cfg.registry, Path(cfg.cache_dir), out, commit),
            )
    finally:
        for part in (measurer, compiler, control):
            if part is not None:
                part.close()
    render_search.final_report(result, json_out)
    if plot is not None:
        render_search.plot_front(result, plot)
    if result.interrupted:  # after the report: main() ends with what the journal keeps
        from ctune.interrupts import Interrupted
        from ctune.search.session_journal import kept_line

        raise Interrupted(kept_line(result.journal, result.evaluations, result.confirmation_rounds))
    if result.inconclusive:
        why = (
            "the default build beats every build the constraints allow"
            if result.feasibility is not None and result.feasibility.dominated
            else "no measured candidate meets the constraints"
        )
        raise SearchInconclusive(f"search inconclusive: {why}; nothing pinned (report above)")
