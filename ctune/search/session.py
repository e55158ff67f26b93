"""Putting one search together: the composition root every entry point goes through.

``ctune search`` (one problem or a set; ``registry retune --run`` is that command),
``ctune.tune``, the test and benchmark helpers and ``run_search`` describe a search by its
explicit inputs, a :class:`SearchSession`: settings, spec, objective, options, and what
they choose instead of the defaults (toolchain, compiler, measurer, device limits,
capabilities, clock, publisher). ``open`` checks the request before anything is compiled,
makes the parts the settings call for (nvcc or the engine's compile tasks; GPU 0's
worker, another GPU's, or the engine's GPU workers), derives the device's limits and
returns the run ready to execute: its frozen ``RunInputs``, and the parts it made, which
it closes. The driver executes it (``driver.run_search``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ctune.errors import ToolchainError, UserError
from ctune.measure import capabilities as capability_probes
from ctune.measure.capabilities import gpu_available
from ctune.search import Compiler, Publisher, make_strategy
from ctune.search import journal as journal_mod
from ctune.search.confirm_stage import sure_rounds
from ctune.search.cost_policy import on_by_default
from ctune.search.options import SearchOptions
from ctune.search.plan import SearchPlan, check_warm_start_resumable, new_plan, resume_plan
from ctune.search.run_state import RunInputs, sampling_plan
from ctune.search.session_journal import check_default_build, request_identity
from ctune.search.strategy import StrategyContext
from ctune.spec.space.limits import DeviceLimits, device_limits, tabled_limits

if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings
    from ctune.measure import Measurer, SamplingPlan
    from ctune.objective.spec import ObjectiveSpec
    from ctune.spec import KernelSpec


# --- the parts the settings call for -------------------------------------------------------


def compiler_for(spec: KernelSpec, toolchain: Toolchain, settings: Settings) -> Compiler:
    """NvccCompiler for a local run, else an EngineCompiler (one line, exit 3, without Dask)."""
    from ctune.scale import uses_engine

    if uses_engine(settings):
        from ctune.scale.engine import require_distributed

        require_distributed()
        from ctune.scale.compiler import EngineCompiler

        return EngineCompiler(spec, toolchain, settings)
    from ctune.compile.nvcc import NvccCompiler

    return NvccCompiler.from_settings(spec, toolchain, settings, search=True)


def measurer_for(settings: Settings) -> Measurer | None:
    """None for a local run on GPU 0 (the session makes it, after its checks), a
    WorkerMeasurer for one other GPU, else an EngineMeasurer on the engine's GPU workers."""
    from ctune.scale import uses_engine

    if uses_engine(settings):
        from ctune.scale.engine import require_distributed

        require_distributed()
        from ctune.scale.measurer import EngineMeasurer

        return EngineMeasurer(settings)
    from ctune.scale.engine import resolve_gpus

    (device,) = resolve_gpus(settings.gpus)
    if device == 0:
        return None
    from ctune.measure.session import WorkerMeasurer

    return WorkerMeasurer(device=device, settings=settings)


def default_measurer(settings: Settings) -> Measurer:
    """The GPU measurer a search makes when given none: the engine's workers or another GPU
    than 0 where the settings say so, else a worker on GPU 0."""
    chosen = measurer_for(settings)
    if chosen is not None:
        return chosen
    try:
        from ctune.measure.session import WorkerMeasurer
    except ImportError as exc:
        raise ToolchainError(
            f"GPU measurement is not available in this ctune install ({exc}); "
            "install the cuda13 extra (pip install 'ctune[cuda13]')"
        ) from None
    return WorkerMeasurer(device=0, settings=settings)


def default_compiler(settings: Settings, spec: KernelSpec, toolchain: Toolchain | None) -> Compiler:
    """The compiler the settings call for, on ``toolchain`` or the settings' own."""
    from ctune.compile.select_toolchain import toolchain_for

    return compiler_for(spec, toolchain or toolchain_for(settings), settings)


def target_arch(settings: Settings, spec: KernelSpec) -> str:
    """The architecture a search builds for: ``--arch`` (the setting), else the spec's."""
    return settings.arch or spec.arch


# --- what this machine can measure ---------------------------------------------------------


def probe_capabilities() -> set[str]:
    """What this machine offers: "gpu" (a CUDA device) and "nvml" (energy counters)."""
    return capability_probes.probe_capabilities(gpu_available)


_NEED_TEXT = {
    "gpu": "a CUDA GPU (none visible; run `ctune doctor`)",
    "nvml": "NVML energy readings (install nvidia-ml-py and check permissions; `ctune doctor`)",
}


def check_needs(objective: ObjectiveSpec, capabilities: set[str] | frozenset[str]) -> None:
    """Refuse terms this machine cannot measure, naming the term and the fix."""
    terms = [t for o in objective.objectives for _, t in o.parts]
    terms += [c.term for c in objective.constraints]
    for need in ("gpu", "nvml"):
        if need in objective.needs and need not in capabilities:
            names = sorted({t.name for t in terms if need in t.needs})
            raise ToolchainError(
                f"{', '.join(names)} need{'s' if len(names) == 1 else ''} {_NEED_TEXT[need]}; "
                "nothing was compiled"
            )


def require_capabilities(
    objective: ObjectiveSpec,
    measurer: Measurer | None,
    capabilities: set[str] | frozenset[str] | None = None,
) -> None:
    """:func:`check_needs` against ``capabilities``, else the measurer's, else the probes'."""
    caps = capabilities
    if caps is None and measurer is not None:
        caps = measurer.capabilities
    if caps is None and objective.needs:
        caps = probe_capabilities()
    check_needs(objective, set(caps or ()))


# --- the request -------------------------------------------------------------------------


def _is_whole(value: object) -> bool:
    """An int and not a bool: ``True`` is no budget, and 6.5 evaluations are none."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_options(opts: SearchOptions) -> None:
    """Refuse an option of the wrong type or out of range before anything is probed,
    compiled or written: the one home of these rules for ``ctune search`` and ``ctune.tune``
    alike (a NaN or infinite ``--time`` passed every comparison and broke the journal)."""
    for name, value in (("budget", opts.budget), ("patience", opts.patience)):
        if value is not None and not _is_whole(value):
            raise UserError(f"--{name} must be a whole number, got {value!r}")
        if value is not None and value < 1:
            raise UserError(f"--{name} must be at least 1, got {value}")
    time_s = opts.time_s
    if time_s is not None:
        if not isinstance(time_s, (int, float)) or isinstance(time_s, bool):
            raise UserError(f"--time must be a number of seconds, got {time_s!r}")
        if not math.isfinite(time_s) or time_s <= 0:
            raise UserError(f"--time must be positive and finite, got {time_s:g} s")
    if opts.seed is not None and not _is_whole(opts.seed):
        raise UserError(f"--seed must be a whole number, got {opts.seed!r}")
    if not _is_whole(opts.confirm_processes) or opts.confirm_processes < 0:
        raise UserError(
            f"--confirm-processes must be a whole number, 0 or more, got {opts.confirm_processes!r}"
        )
    if opts.strategy is not None and not isinstance(opts.strategy, str):
        raise UserError(f"--strategy must be a strategy's name, got {opts.strategy!r}")
    if not isinstance(opts.strategy_options, Mapping) or not all(
        isinstance(k, str) for k in opts.strategy_options
    ):
        raise UserError(
            f"strategy_options (--option) must be a dict {{name: value}}, "
            f"got {opts.strategy_options!r}"
        )
    if opts.fill is not None and not isinstance(opts.fill, bool):
        raise UserError(f"fill must be true or false, got {opts.fill!r}")
    if opts.cost_model is not None and not isinstance(opts.cost_model, bool):
        raise UserError(f"cost_model must be true or false, got {opts.cost_model!r}")


def check_request(
    spec: KernelSpec,
    objective: ObjectiveSpec,
    opts: SearchOptions,
    device: str | None,
    *,
    identity: bool = True,
) -> SearchPlan:
    """The search's plan, once every part of the request that needs no GPU or toolchain is
    checked: the options' ranges, the problem, a journal to resume (its search, its flags,
    then every record; its build is checked when the journal opens), warm-start
    configurations (of this kernel at all?), the strategy and its options. Called before
    the capability check and before anything is compiled, so that a typo is found on a
    machine without a GPU too (exit 2), not first on the GPU machine.

    ``identity=False`` leaves out whether the journal is this search's, and its records:
    before device genes are opened (their values come from the GPU) the space is not the
    search's yet, and the rest of the request is checked before the GPU is asked for them."""
    check_options(opts)
    problem = spec.problem(opts.problem)
    n_objectives = len(objective.objectives)
    if opts.resume is None:
        plan = new_plan(opts, n_objectives, spec.default_budget)
    else:
        path = Path(opts.resume)
        if not path.exists():
            raise UserError(f"{path}: no such journal to resume")
        header = journal_mod.read_header(path)  # a FIFO or a folder is refused there
        plan, conflict = resume_plan(opts, header, n_objectives, path)
        # is it this search's journal at all, before which of its flags differs
        if identity:
            ours = request_identity(spec, problem.name, objective, device)
            journal_mod.check_identity(path, header, ours)
        if conflict is not None:
            raise UserError(conflict)
        if identity:  # every record checked before anything is compiled (read again to replay)
            replay, _ = journal_mod.read(path)
            check_warm_start_resumable(plan, opts, len(replay.states), path)
    if opts.warm_start:
        from ctune.exchange.t4 import check_shares_genes

        check_shares_genes(opts.warm_start, spec.space, spec.name, opts.warm_start_source)
    # a strategy checks its options when it is made: once here on the spec's space, and
    # again when the search starts, on the space within the device's limits (known only
    # after the probe)
    context = StrategyContext(
        spec.name, spec.space, dict(problem.dims), objective.directions, plan.seed, opts.controls
    )
    make_strategy(plan.strategy, context, plan.options)
    return plan


# --- the session -------------------------------------------------------------------------


def _start_workers(
    measurer: Measurer | None,
    opts: SearchOptions,
    objective: ObjectiveSpec,
    plan: SamplingPlan,
    spec: KernelSpec,
) -> None:
    """Start the measuring worker now, and beside it the processes of the confirmation
    rounds that will surely run (they wait, fresh, until then), each asked to set the
    problem up once it is up: a start is costly and the first measurement waits for all
    of them, so it overlaps the device probe and the baseline's compile instead of
    following them."""
    if measurer is None or not objective.measures:
        return
    measurer.prestart(1 + sure_rounds(opts.confirm_processes, objective, measurer), wait=False)
    measurer.set_up_ahead(spec, spec.default_candidate(), spec.problem(opts.problem), plan)


def _build_baseline_ahead(compiler: Compiler, spec: KernelSpec, opts: SearchOptions) -> None:
    """Start the default build's compile (its include closure, nvcc, the check of its
    args) now, beside the device probe: the baseline then finds it built or under way
    instead of starting it after the probe.
    Its outcome, an error included, is the baseline's: the local compiler runs one compile
    per build key and says an args error again on every build. (An engine's compiler would
    compile it twice: it is left to start with the baseline.)"""
    from ctune.compile.nvcc import NvccCompiler

    if isinstance(compiler, NvccCompiler):
        compiler.submit(spec.default_candidate(), spec.problem(opts.problem))


@dataclass(frozen=True)
class SearchSession:
    """One search's explicit inputs; ``open`` puts the run together.

    ``compiler`` and ``measurer`` replace what the settings call for (stand-ins in tests);
    by default the compiler is nvcc on ``toolchain`` (else the settings' own) or the
    engine's compile tasks, and the measurer GPU 0's worker, another GPU's or the engine's
    GPU workers, made after the capability check and closed at the end. ``capabilities``
    overrides the probe (else the measurer's, else NVML/CuPy probes). ``limits`` are the
    device's (``spec/space/limits.py``); by default the GPU's when ctune measures on it itself
    and it is of the target architecture, else the target's table. ``publish`` (the
    registry's ``ResultPublisher``) writes, and may commit, the artifact of a finished
    search; it is checked before anything else. ``fingerprint`` overrides the probe for
    the artifact.
    """

    settings: Settings
    spec: KernelSpec
    objective: ObjectiveSpec
    options: SearchOptions = field(default_factory=SearchOptions)
    compiler: Compiler | None = None
    measurer: Measurer | None = None
    toolchain: Toolchain | None = None
    capabilities: set[str] | frozenset[str] | None = None
    limits: DeviceLimits | None = None
    clock: Callable[[], float] = time.monotonic
    publish: Publisher | None = None
    fingerprint: Mapping[str, str] | None = None

    @contextmanager
    def open(self) -> Iterator[RunInputs]:
        """Check the request, make the parts not given, and yield the run's inputs; the
        parts made here are closed when the run ends, however it ends."""
        spec, objective, opts, settings = self.spec, self.objective, self.options, self.settings
        if self.publish is not None:
            self.publish.check()
        measurer, compiler = self.measurer, self.compiler
        known = measurer.device_name if measurer is not None else None  # never probed
        plan = check_request(spec, objective, opts, known or None)
        if opts.cost_model is None and opts.resume is None and len(objective.objectives) == 1:
            on = on_by_default(settings, spec, objective.objectives[0].text, opts.journal)
            plan = dataclasses.replace(plan, cost_model=on)
        # the target's table is known without a GPU: a default build over it is the
        # spec's to fix, whether this machine can measure or not
        table = self.limits or tabled_limits(target_arch(settings, spec))
        if table is not None:
            check_default_build(spec, table, spec.problem(opts.problem))
        require_capabilities(objective, measurer, self.capabilities)
        owned: list[Measurer | Compiler] = []
        try:
            own_gpu = measurer is None and objective.measures
            if own_gpu:
                measurer = default_measurer(settings)
                owned.append(measurer)
            _start_workers(
                measurer, opts, objective, sampling_plan(settings, spec, objective), spec
            )
            if compiler is None:
                compiler = default_compiler(settings, spec, self.toolchain)
                owned.append(compiler)
                _build_baseline_ahead(compiler, spec, opts)
            limits = self.limits
            if limits is None:
                limits = device_limits(target_arch(settings, spec), probe=own_gpu)
            yield RunInputs(
                settings=settings,
                spec=spec,
                objective=objective,
                opts=opts,
                search_plan=plan,
                problem=spec.problem(opts.problem),
                # what the strategy and the filler may propose: the spec's space within
                # the device
                space=limits.constrain(spec.space, spec.launch),
                limits=limits,
                compiler=compiler,
                measurer=measurer,
                clock=self.clock,
            )
        finally:
            for part in reversed(owned):
                part.close()


__all__ = [
    "SearchSession",
    "check_needs",
    "check_options",
    "check_request",
    "compiler_for",
    "default_compiler",
    "default_measurer",
    "gpu_available",
    "measurer_for",
    "probe_capabilities",
    "require_capabilities",
    "target_arch",
]
