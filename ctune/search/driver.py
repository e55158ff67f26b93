"""THE search loop: ask -> dedup -> compile ahead -> measure -> score -> journal -> tell.

This module only coordinates, one generation at a time; each step has its own module
(docs/design.md, "the path of one candidate"): ``session.py`` puts the search together,
``scheduler.py`` compiles ahead, measures and fills, ``pipeline.py`` scores and journals
each candidate, ``trial_book.py`` accounts every trial, ``budget.py`` decides when to stop,
``session_journal.py`` starts and writes the journal, ``confirm_stage.py`` re-measures
what the result reports. A candidate's failure is a trial with an outcome, never an
exception; what counts against the budget and when a search stops: docs/search.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TypeVar

from ctune.interrupts import (
    STOP_SIGNALS,
    Interrupted,
    kept_with,
    nothing_kept_yet,
    start_thread,
)
from ctune.records import Candidate, Trial
from ctune.search import Compiler, Publisher, make_strategy
from ctune.search import journal as journal_mod
from ctune.search.budget import MAX_BATCH
from ctune.search.confirm_stage import ConfirmStage, can_confirm
from ctune.search.cost_policy import Refill, cost_policy
from ctune.search.events import (
    BaselineMeasured,
    GenerationFinished,
    SearchFinished,
    SearchStarted,
)
from ctune.search.filling import Filler
from ctune.search.journal_writer import JournalWriter, complete
from ctune.search.options import SearchOptions
from ctune.search.pipeline import Pipeline
from ctune.search.plan import DEFAULT_BUDGET
from ctune.search.result import ResultRecord, SearchResult
from ctune.search.run_result import search_result
from ctune.search.run_state import (
    EventSink,
    Fingerprints,
    RunInputs,
    RunStatus,
    SearchRun,
    l2_policy,
)
from ctune.search.session import (
    SearchSession,
    check_needs,
    check_request,
    default_measurer,
    gpu_available,
    probe_capabilities,
    require_capabilities,
)
from ctune.search.session_journal import SessionJournal
from ctune.search.strategy import StrategyContext

T = TypeVar("T")
if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings
    from ctune.measure import Measurer
    from ctune.objective.spec import ObjectiveSpec
    from ctune.spec import KernelSpec
    from ctune.spec.space.limits import DeviceLimits

#: consecutive generations with nothing new before the search counts as converged
MAX_IDLE_GENERATIONS = 10


# --- helpers ----------------------------------------------------------------------------


def _fingerprint(
    inputs: RunInputs, measurer: Measurer | None, *, gpu: bool = True
) -> dict[str, str]:
    """A part that says what it is (``fingerprint_fields``: a stand-in, a replay) gives
    its fields; otherwise the real toolchain, source and GPU are probed."""
    spec, problem, settings = inputs.spec, inputs.problem.name, inputs.settings
    stand_in: dict[str, str] = {}
    for part in (inputs.compiler, measurer):
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
            "l2_policy": l2_policy(settings, spec),
            **stand_in,
        }
    return identity_probe.current_fingerprint(
        spec,
        gpu=gpu,
        problem=problem,
        nvcc=nvcc_for(settings),
        l2_policy=l2_policy(settings, spec),
        arch=settings.arch or None,
    )


def _fingerprints_ahead(inputs: RunInputs) -> Future[Fingerprints]:
    """The journal's fingerprint (no GPU fields) and the artifact's, computed in a thread
    from the run's start: the artifact's scans the source's includes with nvcc, which would
    otherwise sit between the baseline's measurement and the next candidate's
    (docs/search.md). Both describe what the search compiled: the source as it starts.
    The journal's is the artifact's without its GPU fields, unless a stand-in measurer
    gave those: then it is made without the measurer."""
    from ctune.evidence.identity import FIELDS

    def compute() -> Fingerprints:
        measurer = inputs.measurer
        artifact = _fingerprint(inputs, measurer)
        every = (
            _fingerprint(inputs, None, gpu=False)
            if measurer is not None and measurer.fingerprint_fields() is not None
            else artifact
        )
        journal = {k: v for k, v in every.items() if FIELDS.get(k, ("", ""))[1] != "gpu"}
        return journal, artifact

    return _ahead(compute, "ctune-fingerprint")


#: (valid candidates of the search's space, exact?, valid candidates of the spec's own)
Counts = tuple[int, bool, int]


def _counts_ahead(inputs: RunInputs) -> Future[Counts]:
    """The valid-candidate counts the start announces, computed in a thread from the run's
    start: where the restricted part is estimated by sampling the count takes seconds to
    tens of seconds, which would otherwise sit between the baseline's measurement and the
    first generation's compiles (docs/search.md). The spec's own count (before the
    device's limits) only where those limits add restrictions."""

    def compute() -> Counts:
        count, exact = inputs.space.count_valid(inputs.problem.dims)
        total = count
        if len(inputs.space.restrictions) != len(inputs.spec.space.restrictions):
            total, _ = inputs.spec.space.count_valid(inputs.problem.dims)
        return count, exact, total

    return _ahead(compute, "ctune-count")


def _ahead(compute: Callable[[], T], name: str) -> Future[T]:
    """``compute`` started in a daemon thread of its own, which ends with it: a search
    that stops before it is done does not wait for it, and neither does the exit."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(compute())
        except BaseException as exc:  # the caller meets it when it asks for the result
            future.set_exception(exc)

    start_thread(run, name=name)
    return future


# --- the run --------------------------------------------------------------------------------


class _Search:
    """One search: its inputs and state (``run``) and the stages that coordinate them.

    The stages own one thing each: the journal writer (what is written, and when), the
    pipeline (compile ahead, measure, fill), the session's start (baseline, new/resume,
    warm start) and the confirm stage; the state objects are the trial book (every
    trial, accounted once), the budget (when to stop), the timers and the loop's status.
    """

    def __init__(self, inputs: RunInputs, emit: EventSink) -> None:
        spec, objective, opts = inputs.spec, inputs.objective, inputs.opts
        plan = inputs.search_plan
        fingerprints = _fingerprints_ahead(inputs)
        self.counts = _counts_ahead(inputs)
        strategy = make_strategy(
            plan.strategy,
            StrategyContext(
                spec.name,
                inputs.space,
                dict(inputs.problem.dims),
                objective.directions,
                plan.seed,
                opts.controls,
            ),
            plan.options,
        )
        # the filler learns its parents from every trial the book accounts
        filler = Filler(spec.name, inputs.space, inputs.problem.dims, objective.directions)
        self.run = SearchRun(inputs, strategy, emit, fingerprints, filler.observe)
        self.writer = JournalWriter(self.run.book, self.run.timers)
        confirms = can_confirm(opts.confirm_processes, objective, inputs.measurer)
        self.pipeline = Pipeline(self.run, self.writer, filler, confirms)
        self.costs = cost_policy(self.run, self.writer)  # --cost-model: which builds to skip
        self.session = SessionJournal(self.run, self.writer, self.pipeline, self.costs)
        run = self.run
        self.confirmation = ConfirmStage(
            inputs, run.book, run.status, run.timers, run.notices, self.writer
        )

    # --- the loop -----------------------------------------------------------------------------
    def loop(self) -> None:
        """Generations until a stop rule, the strategy or the clock ends the search."""
        run = self.run
        status = run.status
        idle = 0
        while True:
            reason = run.budget.stop_check(status.stop_requested)
            if reason:
                status.stop_reason = reason
                return
            remaining = run.budget.remaining()
            asked = run.strategy.ask(min(MAX_BATCH, remaining))
            if not asked:
                status.stop_reason = "exhausted"
                return
            new, fresh = self.generation_of(asked, remaining)
            if status.stop_requested:
                status.stop_reason = "interrupted"
                return
            idle = 0 if fresh else idle + 1
            if idle >= MAX_IDLE_GENERATIONS:
                status.stop_reason = "converged"
                return
            if len(fresh) < len(new):
                status.stop_reason = "time"
                return

    def generation_of(
        self, asked: Sequence[Candidate], remaining: int
    ) -> tuple[list[Candidate], list[Trial]]:
        """Evaluate one generation and, once each of its candidates has a trial, tell it to
        the strategy and journal its state: duplicates come from the cache (not counted
        against the budget), the new candidates through the pipeline (a resumed generation
        that was cut short: from its journaled trials first). One that a stop or the clock
        cut short is neither told nor recorded: a resume asks it again. Returns the new
        candidates and those of them that finished (fewer: cut short)."""
        run = self.run
        book, status = run.book, run.status
        status.generation += 1
        told: list[Trial] = []
        keys: set[str] = set()

        def unseen(cands: Sequence[Candidate]) -> list[Candidate]:
            """Those of ``cands`` new to this generation; a cached one is told from the cache."""
            out = []
            for cand in cands:
                key = cand.key()
                if key in book.cache:
                    told.append(book.cache[key])
                    book.cached += 1
                elif key not in keys:
                    keys.add(key)
                    out.append(cand)
            return out

        new = unseen(asked)[:remaining]

        def ask_more(n: int) -> list[Candidate]:
            """Up to ``n`` more of the strategy's candidates for the refills."""
            more = unseen(run.strategy.ask(n))
            new.extend(more)
            return more

        space = run.inputs.spec.space
        refill = Refill(
            ask_more,
            self.pipeline.jobs,
            lambda cand: space.build_group(cand.genes),
            run.budget.measurements_left(),
            run.budget.decisions_left(),
        )
        # skipped: journaled already; refills take the compile slots skips freed
        screened = self.costs.screen(list(new), status.generation, refill)
        finished = self.pipeline.evaluate_batch(screened.kept, status.generation)
        told.extend(screened.skipped + finished)
        # fillers were not asked; a skipped candidate was decided, as a measured one
        fresh = screened.skipped + [t for t in finished if t.candidate.key() in keys]
        if not complete([c.key() for c in new], told):
            return new, fresh
        self.writer.end_generation(status.generation, run.strategy, told)
        improved = run.budget.end_generation(book.score()[0])
        run.notices.emit(GenerationFinished(run.progress(), improved))
        return new, fresh

    def result(self, interrupted: bool) -> SearchResult:
        """The search's result; a resumed generation cut short that was not asked again (the
        clock ran out first) still counts its journaled trials."""
        self.writer.take()
        self.costs.report()
        return search_result(self.run, self.confirmation, self.writer, interrupted)


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
    """Search ``spec`` for ``objective``: the :class:`SearchSession` of these inputs
    (its docstring says what each replaces), executed; progress goes to ``on_event``.
    Returns the result, also when interrupted (Ctrl-C), with ``stop_reason ==
    "interrupted"``."""
    session = SearchSession(
        settings,
        spec,
        objective,
        options or SearchOptions(),
        compiler=compiler,
        measurer=measurer,
        toolchain=toolchain,
        capabilities=capabilities,
        limits=limits,
        clock=clock,
        publish=publish,
        fingerprint=fingerprint,
    )
    return run_session(session, on_event)


def run_session(session: SearchSession, on_event: EventSink | None = None) -> SearchResult:
    """Execute the search ``session`` puts together; progress goes to ``on_event``."""
    emit = on_event or (lambda event: None)
    with session.open() as inputs:
        search = _Search(inputs, emit)
        search.run.notices.listened = on_event is not None
        return _execute(search, session.options, session.fingerprint, emit, session.publish)


@contextlib.contextmanager
def _graceful_interrupt(status: RunStatus, in_flight: str = "candidate") -> Iterator[None]:
    """The first SIGINT (or SIGTERM) asks the run to stop after the ``in_flight`` step (a
    candidate, a confirmation round); the second is a KeyboardInterrupt as usual. Only the
    main thread can own a signal handler: elsewhere (a search started from a worker
    thread) Ctrl-C keeps Python's default."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    notice = f"\nctune: finishing the {in_flight} in flight, then saving (again: stop now)\n"

    def handler(signum: int, frame: FrameType | None) -> None:
        if status.stop_requested:
            raise KeyboardInterrupt
        status.stop_requested = True
        # only a flag and one raw line here: the live display may be mid-render
        os.write(2, notice.encode())

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


def _execute(
    search: _Search,
    opts: SearchOptions,
    fingerprint: Mapping[str, str] | None,
    emit: EventSink,
    publish: Publisher | None,
) -> SearchResult:
    run, writer = search.run, search.writer
    nothing_kept_yet()
    if search.confirmation.can_confirm():
        from ctune.evidence.stats import import_tests_in_background

        import_tests_in_background()
    try:
        if opts.resume is not None:
            search.session.open_resume(Path(opts.resume))
        else:
            search.session.open_new()
        _announce(search, opts, emit)
        result = _result(search, _search(search))
        if not result.interrupted and result.baseline is not None:
            record = _record(run, writer, result, fingerprint)
            result = dataclasses.replace(result, record=record)
            if publish is not None:
                result = publish(run.inputs.spec, run.inputs.objective, result)
        emit(SearchFinished(result))
        return result
    except KeyboardInterrupt as exc:  # outside the graceful stops: say what the journal has,
        # and what the result's publishing kept (a commit: a resume does not make it again)
        raise Interrupted(kept_with(exc, writer.kept())) from None
    finally:
        if writer.journal is not None:
            writer.journal.close()


def _announce(search: _Search, opts: SearchOptions, emit: EventSink) -> None:
    """The search's start (and its baseline) to the display; the patience starting point."""
    run = search.run
    inputs, book = run.inputs, run.book
    journal = search.writer.journal
    assert journal is not None
    count, exact, total = search.counts.result()
    emit(
        SearchStarted(
            inputs.spec.name,
            inputs.problem.name,
            journal.path,
            search.writer.trials() if opts.resume else 0,
            inputs.strategy_name,
            inputs.objective.describe(),
            run.budget.limit,
            inputs.search_plan.time_s,
            count,
            exact,
            search.pipeline.jobs,
            tuple(o.text for o in inputs.objective.objectives),
        )
    )
    if book.baseline is not None:
        emit(BaselineMeasured(book.baseline))
    run.note_device_limits(count, total)
    run.budget.improved(book.score()[0])


def _search(search: _Search) -> bool:
    """Warm start and loop until a stop rule; True when Ctrl-C ended it."""
    run = search.run
    try:
        with _graceful_interrupt(run.status):
            search.session.warm_start()
            search.loop()
    except KeyboardInterrupt:
        run.notices.note("search interrupted: the candidate in flight was abandoned", "info")
        return True
    interrupted = run.status.stop_reason == "interrupted"
    if interrupted:
        run.notices.note(
            "search interrupted: the candidate in flight finished and was saved", "info"
        )
    return interrupted


def _result(search: _Search, interrupted: bool) -> SearchResult:
    """The result, confirmed unless the search was interrupted. A Ctrl-C while confirming
    stops after the round in flight (the second: at once), the last round too, and one
    after it before the result is made stops all the same: the rounds measured are in the
    journal, and the result is the search's own front, marked interrupted (not written)."""
    run = search.run
    if interrupted:
        return search.result(True)
    try:
        with _graceful_interrupt(run.status, "confirmation round"):
            result = search.result(False)
    except KeyboardInterrupt:
        run.notices.note(
            "search interrupted while confirming: the round in flight was abandoned; "
            f"{search.writer.rounds} round(s) are in the journal",
            "info",
        )
        return search.result(True)
    if run.status.stop_requested:
        if not result.interrupted:  # a stop after the rounds ended, before the result
            result = search.result(True)
        run.notices.note(
            "search interrupted while confirming: the round in flight finished; "
            f"{search.writer.rounds} round(s) are in the journal",
            "info",
        )
        return dataclasses.replace(result, notes=tuple(run.notices.notes))
    return result


def _record(
    run: SearchRun,
    writer: JournalWriter,
    result: SearchResult,
    fingerprint: Mapping[str, str] | None,
) -> ResultRecord:
    """Where the numbers come from and how the search ran, for the artifact."""
    from ctune.measure.protocol import record as protocol_record

    inputs = run.inputs
    fp = dict(fingerprint) if fingerprint is not None else run.artifact_fingerprint()
    journal = writer.journal
    assert journal is not None
    provenance = {
        "strategy": inputs.strategy_name,
        "seed": inputs.search_plan.seed,
        "evaluations": result.evaluations,
        "budget": run.budget.limit,
        "journal_sha256": journal.sha256(),
        "created_utc": journal_mod.utc_stamp(),
        "wall_s": round(result.timing.wall_s, 3),
    }
    sources = inputs.compiler.source_inputs(inputs.spec, inputs.settings)
    return ResultRecord(
        fp, provenance, protocol_record(run.status.sampling), sources, dict(run.strategy.options)
    )


__all__ = [
    "DEFAULT_BUDGET",
    "EventSink",
    "SearchOptions",
    "check_needs",
    "check_request",
    "default_measurer",
    "gpu_available",
    "probe_capabilities",
    "require_capabilities",
    "run_search",
    "run_session",
]
