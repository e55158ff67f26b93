"""THE search loop: ask -> dedup -> compile ahead -> measure -> score -> journal -> tell.

This module coordinates; each step has its own module (docs/design.md, "the path of
one candidate"): ``pipeline.py`` compiles ahead, measures and fills, ``trial_book.py``
accounts every trial, ``budget.py`` decides when to stop, ``session_journal.py`` starts
(new, resumed, warm-started) and writes the journal, ``confirm_stage.py`` re-measures
what the result reports. One generation at a time:

1. the strategy proposes candidates (``ask``);
2. candidates already tried (in this run or in the resumed journal) are
   answered from the cache: never measured twice, not counted against the
   budget;
3. new candidates are compiled ahead, ``jobs`` builds at a time
   (``submit`` futures): while the GPU measures one candidate, the next
   builds compile. Candidates that differ only in runtime genes share one
   build, so the second waits on the first's future instead of taking a
   compile slot (and running nvcc again);
4. each is measured serially on the one GPU as soon as its build is ready
   (batch order among the ready ones), scored by the objective spec,
   appended to the journal (fsync'd) and only then, per generation, told to
   the strategy. While every build the batch waits for is still compiling,
   the GPU measures fillers instead: unseen runtime-gene variants of the
   best builds, which need no compile (``filling.py``; ``fill=False`` turns
   it off). They are ordinary trials, journaled and told with the
   generation's, but extra to the budget (below).

Candidate failures are trials with an outcome, never exceptions.
What does raise: a baseline (default build) that does not compile or does
not run, before anything is written (rule I1); the first N searched
candidates all failing to compile (a broken kernel or toolchain, not a bad
region); a term that needs NVML or a GPU this machine lacks, before
anything is compiled but after the request itself is checked (problem,
strategy, options, a journal to resume): a typo is found without a GPU.
The first Ctrl-C lets the candidate in flight finish (its measurement is
journaled), starts nothing new and returns what the search has, marked
``interrupted`` (``--resume`` goes on from there); a second Ctrl-C abandons
the candidate in flight at once. Either way every finished trial is
already on disk.

Budget: ``budget`` counts GPU measurements, i.e. distinct binaries (baseline,
failed builds and resumed trials included): a candidate that compiles to a
binary this search already measured reuses that measurement and does not
count (``dedup.py``), and at most ``COMPILE_CAP_FACTOR`` x budget candidates
are compiled. Fillers do not count either: they
run only in GPU time that pending compiles would leave idle (a filler in
progress delays a build that finishes meanwhile by one measurement at most),
so the strategy gets its whole budget of builds; ``time_s`` stops starting
new candidates after that much wall time; ``patience`` stops after that
many generations without improving the best value (one objective) or the
hypervolume (several).
Without either budget, the search stops at ``DEFAULT_BUDGET`` evaluations
(exhaustive search: when the space is exhausted). These and the strategy, its
options and the seed are the search's plan (``plan.py``): recorded in the
journal, reused by ``--resume``, which refuses a flag that differs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ctune.errors import ToolchainError, UserError
from ctune.interrupts import STOP_SIGNALS, Interrupted
from ctune.measure import capabilities
from ctune.measure.capabilities import gpu_available
from ctune.records import Candidate, Trial
from ctune.search import Compiler, Publisher, Strategy, make_strategy
from ctune.search import journal as journal_mod
from ctune.search.budget import MAX_BATCH, WARM_START_SHARE, Budget
from ctune.search.confirm_stage import ConfirmStage, sure_rounds
from ctune.search.events import (
    BaselineMeasured,
    GenerationFinished,
    Note,
    Progress,
    SearchEvent,
    SearchFinished,
    SearchStarted,
)
from ctune.search.pipeline import Pipeline
from ctune.search.plan import DEFAULT_BUDGET, SearchPlan, new_plan, resume_plan
from ctune.search.pruning import DEFAULT_PRUNE_MARGIN, DEFAULT_SEARCH_REP_MS
from ctune.search.result import ResultRecord, SearchResult
from ctune.search.run_result import search_result
from ctune.search.session_journal import SessionJournal, request_identity
from ctune.search.strategy import StrategyContext
from ctune.search.timers import Timers
from ctune.search.trial_book import TrialBook
from ctune.space.limits import DeviceLimits, device_limits

if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings
    from ctune.controls.setup import ControlsSetup
    from ctune.measure import Measurer, SamplingPlan
    from ctune.objective.spec import ObjectiveSpec
    from ctune.spec import KernelSpec, Problem

log = logging.getLogger(__name__)

#: consecutive generations with nothing new before the search counts as converged
MAX_IDLE_GENERATIONS = 10

EventSink = Callable[[SearchEvent], None]


@dataclass(frozen=True)
class SearchOptions:
    """Everything about one search that is not a setting or the objective spec.

    None (and an empty ``strategy_options``) means not given: a new search takes the
    defaults (``auto``, seed 0, ``DEFAULT_BUDGET`` unless timed, filling on), a resumed
    one the values its journal recorded (``plan.py``).
    """

    problem: str | None = None
    strategy: str | None = None  # auto: search.resolve_name
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    budget: int | None = None
    time_s: float | None = None
    patience: int | None = None
    seed: int | None = None
    resume: Path | None = None
    journal: Path | None = None  # where a new journal goes (default: under cache_dir)
    # at most this many fresh processes re-measure what the decision needs (confirm.py);
    # 0: report the search's own measurements
    confirm_processes: int = 5
    confirm_members: int = 8
    first_failures: int = 8  # if the first N candidates all fail to compile: UserError
    jobs: int = 0  # compile-ahead depth; 0: the compiler's jobs, else settings.jobs, else CPUs
    journal_fsync: bool = True  # False only for tests on slow disks
    fill: bool | None = None  # while builds compile, measure runtime-gene variants (default on)
    # configurations to measure first (a T4 file's best, exchange/t4.py), and where from
    warm_start: tuple[Mapping[str, Any], ...] = ()
    warm_start_source: str = ""
    # the share of --budget a warm start may take (the rest explores); a problem set's later
    # shapes may take more: their seeds are builds the set already compiled
    warm_start_share: float = WARM_START_SHARE
    # a candidate whose first samples' median is this far above the leader stops there
    # (search/pruning.py); None: every candidate gets the full sampling plan
    prune_margin: float | None = DEFAULT_PRUNE_MARGIN
    # GPU time a candidate that was not pruned is sampled for while confirmation will
    # re-measure the result (search/pruning.py); None: the protocol's rep_ms
    search_rep_ms: float | None = DEFAULT_SEARCH_REP_MS
    # the controls engine, its spaces and store, where the space has acf genes
    controls: ControlsSetup | None = None


# --- capabilities --------------------------------------------------------------------------


def probe_capabilities() -> set[str]:
    """What this machine offers: "gpu" (a CUDA device) and "nvml" (energy counters)."""
    return capabilities.probe_capabilities(gpu_available)


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


# --- helpers ----------------------------------------------------------------------------


def _l2(settings: Settings, spec: KernelSpec) -> str:
    """The L2 policy: --l2-policy / CTUNE_L2_POLICY / [tool.ctune] when given, else the
    spec's."""
    return settings.l2_policy or spec.l2_policy


def _plan(settings: Settings, spec: KernelSpec, objective: ObjectiveSpec) -> SamplingPlan:
    from ctune.measure import SamplingPlan

    base = SamplingPlan(
        warmup_ms=settings.warmup_ms,
        rep_ms=settings.rep_ms,
        l2_policy=_l2(settings, spec),
        energy_window_s=settings.energy_window_s,
        timing=settings.timing or spec.timing,
    )
    return objective.sampling_plan(base)


def _fingerprint(
    spec: KernelSpec,
    problem: str,
    settings: Settings,
    compiler: Compiler,
    measurer: Measurer | None,
    *,
    gpu: bool = True,
) -> dict[str, str]:
    """A part that says what it is (``fingerprint_fields``: a stand-in, a replay) gives
    its fields; otherwise the real toolchain, source and GPU are probed."""
    stand_in: dict[str, str] = {}
    for part in (compiler, measurer):
        fields = part.fingerprint_fields() if part is not None else None
        if fields is not None:
            stand_in.update(fields)
    from ctune import identity_probe
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.evidence import identity as fp

    if stand_in:
        return {
            **identity_probe.harness_fields(),
            **fp.spec_part_fields(spec, problem),
            "arch": settings.arch or spec.arch,
            "l2_policy": _l2(settings, spec),
            **stand_in,
        }
    return identity_probe.current_fingerprint(
        spec,
        gpu=gpu,
        problem=problem,
        nvcc=nvcc_for(settings),
        l2_policy=_l2(settings, spec),
        arch=settings.arch or None,
    )


def _fingerprints_ahead(run: _Run) -> Future[tuple[dict[str, str], dict[str, str]]]:
    """The journal's fingerprint (no GPU fields) and the artifact's, computed in a thread
    from the run's start: the artifact's scans the source's includes with nvcc (0.2-0.4 s
    on an H200), which sat between the baseline's measurement and the next candidate's,
    and again at the end. Both describe what the search compiled: the source as it starts.
    The journal's is the artifact's without its GPU fields, unless a stand-in measurer
    gave those: then it is made without the measurer."""
    from concurrent.futures import ThreadPoolExecutor

    from ctune.evidence.identity import FIELDS

    def compute() -> tuple[dict[str, str], dict[str, str]]:
        spec, problem, settings = run.spec, run.problem.name, run.settings
        artifact = _fingerprint(spec, problem, settings, run.compiler, run.measurer)
        every = (
            _fingerprint(spec, problem, settings, run.compiler, None, gpu=False)
            if run.measurer is not None and run.measurer.fingerprint_fields() is not None
            else artifact
        )
        journal = {k: v for k, v in every.items() if FIELDS.get(k, ("", ""))[1] != "gpu"}
        return journal, artifact

    pool = ThreadPoolExecutor(1, thread_name_prefix="ctune-fingerprint")
    try:
        return pool.submit(compute)
    finally:
        pool.shutdown(wait=False)  # the thread ends with its one task


# --- the run --------------------------------------------------------------------------------


class _Run:
    """One search: its parts and the loop that coordinates them.

    The parts own one thing each: the trial book (every trial, accounted once), the
    budget (when to stop), the timers, the session journal (baseline, new/resume, warm
    start, writing), the pipeline (compile ahead, measure, fill) and the confirm stage.
    """

    def __init__(
        self,
        settings: Settings,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        opts: SearchOptions,
        compiler: Compiler,
        measurer: Measurer | None,
        on_event: EventSink,
        clock: Callable[[], float],
        limits: DeviceLimits,
        plan: SearchPlan,
    ) -> None:
        self.settings = settings
        self.spec = spec
        self.objective = objective
        self.opts = opts
        self.compiler = compiler
        self.measurer = measurer
        self.emit = on_event
        self.clock = clock
        self.problem: Problem = spec.problem(opts.problem)
        self.plan = _plan(settings, spec, objective)
        self.search_plan = plan
        self.strategy_name = plan.strategy
        self.limits = limits
        # what the strategy and the filler may propose: the spec's space within the device
        self.space = limits.constrain(spec.space, spec.launch)
        self.generation = 0
        self.stop_reason = ""
        self.notes: list[str] = []
        self.stop_requested = False  # the first Ctrl-C: finish the candidate in flight, stop
        self.listened = False  # does a caller's sink show the notes (then they are not logged)
        self._fingerprints = _fingerprints_ahead(self)
        self.timers = Timers(clock)
        self.pipeline = Pipeline(self)
        observe = self.pipeline.filler.observe  # the filler learns its parents from every trial
        self.book = TrialBook(spec, self.problem, objective.directions, observe)
        self.budget = Budget(plan, self.book, self.timers.elapsed)
        self.session = SessionJournal(self)
        self.confirmation = ConfirmStage(self)
        self.strategy: Strategy = make_strategy(
            self.strategy_name,
            StrategyContext(
                spec.name,
                self.space,
                dict(self.problem.dims),
                objective.directions,
                plan.seed,
                opts.controls,
            ),
            plan.options,
        )

    def build_fingerprint(self) -> dict[str, str]:
        """The artifact fingerprint without the GPU (the device is checked on its own)."""
        return self._fingerprints.result()[0]

    def artifact_fingerprint(self) -> dict[str, str]:
        """The artifact's fingerprint: toolchain, harness, source, GPU."""
        return dict(self._fingerprints.result()[1])

    def note(self, message: str, level: str = "warning") -> None:
        """Say ``message`` once: to the caller's event sink, else to the log."""
        shown = logging.WARNING if level == "warning" else logging.INFO
        log.log(logging.DEBUG if self.listened else shown, "%s", message)
        self.notes.append(message)
        self.emit(Note(message, level))

    def note_device_limits(self, valid: int) -> None:
        """Say how many of the spec's candidates the device's limits rule out, if any."""
        if len(self.space.restrictions) == len(self.spec.space.restrictions):
            return
        total, _ = self.spec.space.count_valid(self.problem.dims)
        if total > valid:
            self.note(
                f"device limits ({self.limits.source}) rule out {total - valid:,} of "
                f"{total:,} candidates before compiling",
                "info",
            )

    def progress(self) -> Progress:
        book = self.book
        failures, infeasible = book.failures()
        score, best, front = book.score()
        elapsed = self.timers.elapsed()
        several = len(self.objective.directions) > 1
        return Progress(
            generation=self.generation,
            evaluations=len(book.trials),
            budget=self.budget.limit,
            elapsed_s=elapsed,
            time_budget_s=self.search_plan.time_s,
            eta_s=self.budget.eta(elapsed, self.timers.session_evals),
            failures=failures,
            infeasible=infeasible,
            cached=book.cached,
            fillers=book.fillers,
            reused=book.reused_asked,
            best=best,
            hypervolume=-score if score is not None and several else None,
            front_size=front,
        )

    # --- the loop -----------------------------------------------------------------------------
    def loop(self) -> None:
        """Generations until a stop rule, the strategy or the clock ends the search."""
        idle = 0
        while True:
            reason = self.budget.stop_check(self.stop_requested)
            if reason:
                self.stop_reason = reason
                return
            remaining = self.budget.remaining()
            asked = self.strategy.ask(min(MAX_BATCH, remaining))
            if not asked:
                self.stop_reason = "exhausted"
                return
            new, fresh = self.generation_of(asked, remaining)
            if self.stop_requested:
                self.stop_reason = "interrupted"
                return
            idle = 0 if fresh else idle + 1
            if idle >= MAX_IDLE_GENERATIONS:
                self.stop_reason = "converged"
                return
            if len(fresh) < len(new):
                self.stop_reason = "time"
                return

    def generation_of(
        self, asked: Sequence[Candidate], remaining: int
    ) -> tuple[list[Candidate], list[Trial]]:
        """Evaluate one generation and tell it to the strategy: duplicates come from the
        cache (not counted against the budget), the new candidates through the pipeline.
        Returns the new candidates evaluated and those of them that finished."""
        self.generation += 1
        told: list[Trial] = []
        new: list[Candidate] = []
        keys: set[str] = set()
        for cand in asked:
            key = cand.key()
            if key in self.book.cache:
                told.append(self.book.cache[key])
                self.book.cached += 1
            elif key not in keys:
                keys.add(key)
                new.append(cand)
        new = new[:remaining]
        finished = self.pipeline.evaluate_batch(new, self.generation)
        told.extend(finished)
        fresh = [t for t in finished if t.candidate.key() in keys]  # fillers were not asked
        self.strategy.tell(told)
        assert self.session.journal is not None
        self.session.journal.append_state(self.generation, self.strategy.state())
        improved = self.budget.end_generation(self.book.score()[0])
        self.emit(GenerationFinished(self.progress(), improved))
        return new, fresh

    def result(self, interrupted: bool) -> SearchResult:
        return search_result(self, interrupted)


def run_search(
    settings: Settings,
    spec: KernelSpec,
    objective: ObjectiveSpec,
    options: SearchOptions | None = None,
    *,
    compiler: Compiler | None = None,
    measurer: Measurer | None = None,
    toolchain: Toolchain | None = None,
    fingerprint: Mapping[str, str] | None = None,
    capabilities: set[str] | frozenset[str] | None = None,
    on_event: EventSink | None = None,
    clock: Callable[[], float] = time.monotonic,
    limits: DeviceLimits | None = None,
    publish: Publisher | None = None,
) -> SearchResult:
    """Search ``spec`` for ``objective``; the one service ``ctune search`` calls.

    ``compiler`` and ``measurer`` are injectable (stand-ins in unit tests);
    by default an ``NvccCompiler`` from ``settings``/``toolchain`` and the
    GPU ``WorkerMeasurer`` are created here, after the capability check, and
    closed at the end. ``capabilities`` overrides the probe (else the
    measurer's ``capabilities`` attribute, else NVML/CuPy probes).
    ``fingerprint`` overrides the probe for the artifact. ``limits`` are the
    device's (``space/limits.py``); by default the GPU's when ctune measures on it
    itself and it is of the target architecture, else the target's table. Progress goes to
    ``on_event``. Returns the result, also when interrupted (Ctrl-C), with
    ``stop_reason == "interrupted"``. ``publish`` (the registry's
    ``ResultPublisher``) writes, and may commit, the artifact of a finished
    search; it is checked before the search starts.
    """
    opts = options or SearchOptions()
    emit = on_event or (lambda event: None)
    if publish is not None:
        publish.check()
    known = measurer.device_name if measurer is not None else None  # never probed
    plan = check_request(spec, objective, opts, known or None)
    require_capabilities(objective, measurer, capabilities)

    owned: list[Measurer | Compiler] = []
    try:
        own_gpu = measurer is None and objective.measures
        if own_gpu:
            measurer = _default_measurer(settings)
            owned.append(measurer)
        _start_workers(measurer, opts, objective, _plan(settings, spec, objective), spec)
        if compiler is None:
            compiler = _default_compiler(settings, spec, toolchain)
            owned.append(compiler)
            _build_baseline_ahead(compiler, spec, opts)
        if limits is None:
            limits = device_limits(settings.arch or spec.arch, probe=own_gpu)
        run = _Run(settings, spec, objective, opts, compiler, measurer, emit, clock, limits, plan)
        run.listened = on_event is not None
        return _execute(run, opts, fingerprint, emit, publish)
    finally:
        for part in reversed(owned):
            part.close()


def _start_workers(
    measurer: Measurer | None,
    opts: SearchOptions,
    objective: ObjectiveSpec,
    plan: SamplingPlan,
    spec: KernelSpec,
) -> None:
    """Start the measuring worker now, and beside it the processes of the confirmation
    rounds that will surely run (they wait, fresh, until then), each asked to set the
    problem up once it is up: a start takes over a second (measured in
    ``measure/worker.py``), and the first measurement waits for all of them, so it
    overlaps the device probe and the baseline's compile instead of following them."""
    if measurer is None or not objective.measures:
        return
    measurer.prestart(1 + sure_rounds(opts.confirm_processes, objective, measurer), wait=False)
    measurer.set_up_ahead(spec, spec.default_candidate(), spec.problem(opts.problem), plan)


def _build_baseline_ahead(compiler: Compiler, spec: KernelSpec, opts: SearchOptions) -> None:
    """Start the default build's compile (its include closure, nvcc, the check of its
    args) now, beside the device probe: the baseline then finds it built or under way
    instead of starting it (on an H200, 0.55 s of probe ran before ~1 s of that path).
    Its outcome, an error included, is the baseline's: the local compiler runs one compile
    per build key and says an args error again on every build. (An engine's compiler would
    compile it twice: it is left to start with the baseline.)"""
    from ctune.compile.nvcc import NvccCompiler

    if isinstance(compiler, NvccCompiler):
        compiler.submit(spec.default_candidate(), spec.problem(opts.problem))


def _check_options(opts: SearchOptions) -> None:
    """Refuse an option out of range before anything is probed, compiled or written."""
    for name, value in (("budget", opts.budget), ("patience", opts.patience)):
        if value is not None and value < 1:
            raise UserError(f"--{name} must be at least 1, got {value}")
    if opts.time_s is not None and opts.time_s <= 0:
        raise UserError(f"--time must be positive, got {opts.time_s:g} s")
    if opts.confirm_processes < 0:
        raise UserError("--confirm-processes must be 0 or more")
    if opts.fill is not None and not isinstance(opts.fill, bool):
        raise UserError(f"fill must be true or false, got {opts.fill!r}")


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
    _check_options(opts)
    problem = spec.problem(opts.problem)
    n_objectives = len(objective.objectives)
    if opts.resume is None:
        plan = new_plan(opts, n_objectives)
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
            journal_mod.read(path)
    if opts.warm_start:
        from ctune.exchange.t4 import check_shares_genes

        check_shares_genes(opts.warm_start, spec.space, spec.name, opts.warm_start_source)
    # a strategy checks its options when it is made: once here on the spec's space, and
    # again in _Run on the space within the device's limits (known only after the probe)
    context = StrategyContext(
        spec.name, spec.space, dict(problem.dims), objective.directions, plan.seed, opts.controls
    )
    make_strategy(plan.strategy, context, plan.options)
    return plan


@contextlib.contextmanager
def _graceful_interrupt(run: _Run, in_flight: str = "candidate") -> Iterator[None]:
    """The first SIGINT (or SIGTERM) asks the run to stop after the ``in_flight`` step (a
    candidate, a confirmation round); the second is a KeyboardInterrupt as usual. Only the
    main thread can own a signal handler: elsewhere (a search started from a worker
    thread) Ctrl-C keeps Python's default."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    notice = f"\nctune: finishing the {in_flight} in flight, then saving (again: stop now)\n"

    def handler(signum: int, frame: FrameType | None) -> None:
        if run.stop_requested:
            raise KeyboardInterrupt
        run.stop_requested = True
        # only a flag and one raw line here: the live display may be mid-render
        os.write(2, notice.encode())

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


def _execute(
    run: _Run,
    opts: SearchOptions,
    fingerprint: Mapping[str, str] | None,
    emit: EventSink,
    publish: Publisher | None,
) -> SearchResult:
    if run.confirmation.can_confirm():
        from ctune.evidence.stats import import_tests_in_background

        import_tests_in_background()
    try:
        if opts.resume is not None:
            run.session.open_resume(Path(opts.resume))
        else:
            run.session.open_new()
        _announce(run, opts, emit)
        result = _result(run, _search(run))
        if not result.interrupted and result.baseline is not None:
            result = dataclasses.replace(result, record=_record(run, result, fingerprint))
            if publish is not None:
                result = publish(run.spec, run.objective, result)
        emit(SearchFinished(result))
        return result
    except KeyboardInterrupt as exc:  # outside the graceful stops: say what the journal has
        if isinstance(exc, Interrupted):
            raise
        raise Interrupted(run.session.kept()) from None
    finally:
        if run.session.journal is not None:
            run.session.journal.close()


def _announce(run: _Run, opts: SearchOptions, emit: EventSink) -> None:
    """The search's start (and its baseline) to the display; the patience starting point."""
    journal = run.session.journal
    assert journal is not None
    count, exact = run.space.count_valid(run.problem.dims)
    emit(
        SearchStarted(
            run.spec.name,
            run.problem.name,
            journal.path,
            len(run.book.trials) if opts.resume else 0,
            run.strategy_name,
            run.objective.describe(),
            run.budget.limit,
            run.search_plan.time_s,
            count,
            exact,
            run.pipeline.jobs,
            tuple(o.text for o in run.objective.objectives),
        )
    )
    if run.book.baseline is not None:
        emit(BaselineMeasured(run.book.baseline))
    run.note_device_limits(count)
    run.budget.improved(run.book.score()[0])


def _search(run: _Run) -> bool:
    """Warm start and loop until a stop rule; True when Ctrl-C ended it."""
    try:
        with _graceful_interrupt(run):
            run.session.warm_start()
            run.loop()
    except KeyboardInterrupt:
        run.note("search interrupted: the candidate in flight was abandoned", "info")
        return True
    interrupted = run.stop_reason == "interrupted"
    if interrupted:
        run.note("search interrupted: the candidate in flight finished and was saved", "info")
    return interrupted


def _result(run: _Run, interrupted: bool) -> SearchResult:
    """The result, confirmed unless the search was interrupted. A Ctrl-C while confirming
    stops after the round in flight (the second: at once); the rounds measured are in the
    journal, and the result is the search's own front, marked interrupted."""
    if interrupted:
        return run.result(True)
    try:
        with _graceful_interrupt(run, "confirmation round"):
            result = run.result(False)
    except KeyboardInterrupt:
        run.note(
            "search interrupted while confirming: the round in flight was abandoned; "
            f"{run.session.rounds} round(s) are in the journal",
            "info",
        )
        return run.result(True)
    if result.interrupted:
        run.note(
            "search interrupted while confirming: the round in flight finished; "
            f"{run.session.rounds} round(s) are in the journal",
            "info",
        )
        return dataclasses.replace(result, notes=tuple(run.notes))
    return result


def _record(run: _Run, result: SearchResult, fingerprint: Mapping[str, str] | None) -> ResultRecord:
    """Where the numbers come from and how the search ran, for the artifact."""
    from ctune.measure.protocol import record as protocol_record

    fp = dict(fingerprint) if fingerprint is not None else run.artifact_fingerprint()
    journal = run.session.journal
    assert journal is not None
    provenance = {
        "strategy": run.strategy_name,
        "seed": run.search_plan.seed,
        "evaluations": result.evaluations,
        "budget": run.budget.limit,
        "journal_sha256": journal.sha256(),
        "created_utc": journal_mod.utc_stamp(),
        "wall_s": round(result.timing.wall_s, 3),
    }
    inputs = run.compiler.source_inputs(run.spec, run.settings)
    return ResultRecord(
        fp, provenance, protocol_record(run.plan), inputs, dict(run.strategy.options)
    )


def _default_compiler(
    settings: Settings, spec: KernelSpec, toolchain: Toolchain | None
) -> Compiler:
    from ctune.compile.select_toolchain import toolchain_for
    from ctune.scale import compiler_for

    return compiler_for(spec, toolchain or toolchain_for(settings), settings)


def _default_measurer(settings: Settings) -> Measurer:
    from ctune.scale import measurer_for

    chosen = measurer_for(settings)  # the engine's GPU workers, or another GPU than 0
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


__all__ = [
    "DEFAULT_BUDGET",
    "SearchOptions",
    "check_needs",
    "check_request",
    "gpu_available",
    "probe_capabilities",
    "require_capabilities",
    "run_search",
]
