"""The search's one scheduler: a batch of candidates through compile slots and measure slots.

Builds compile ahead on the compiler's ``jobs`` slots (this generation's, and the next
ones' where the strategy names them); measurements run on the measurer's ``slots``: one
is measured in line (``Measurer.measure``), more are started (``Measurer.start``). While
no build is ready, a free slot measures a filler (``filling.py``); each binary is measured
once, also across slots (``dedup.py``); the clock and Ctrl-C stop a batch, letting the
measurements in flight finish. With one slot trials are journaled as they are measured;
with several in batch order, so that one seed gives one journal whichever GPU finishes
first. How compile wait and measure time are accounted: docs/design.md, "The scheduler".
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from ctune.measure import Measurer, SamplingPlan
    from ctune.records import Build, Candidate, Measurement, Trial
    from ctune.search import Compiler, Strategy
    from ctune.search.budget import Budget
    from ctune.search.filling import Filler
    from ctune.search.run_state import Notices, RunInputs, RunStatus
    from ctune.search.timers import Timers
    from ctune.search.trial_book import TrialBook
    from ctune.spec.space.params import BuildGroup

POLL_S = 0.25  # how often a wait looks at the Ctrl-C flag

#: builds of later generations queued per compile job, beyond this generation's (only for
#: a strategy that names its next candidates: ``ExhaustiveStrategy.upcoming``)
AHEAD_PER_JOB = 4

#: what measures a batch candidate's binary (``Scheduler._cover``)
Cover = Literal["measure", "covered", "wait", "nothing"]


class Stages(Protocol):
    """What the scheduler uses of the per-candidate stages (``pipeline.py``): the
    generation's sampling plan, the device check and ``evaluate`` (score, journal)."""

    def plan(self, generation: int) -> SamplingPlan: ...

    def within_device(self, cand: Candidate, build: Build) -> Build: ...

    def evaluate(
        self,
        cand: Candidate,
        build: Build,
        generation: int,
        filler: bool = False,
        measured: Measurement | None = None,
    ) -> Trial: ...


class CompileSlots:
    """The compiler's ``jobs`` slots, kept busy ahead of the measurer, across batches."""

    def __init__(
        self,
        inputs: RunInputs,
        strategy: Strategy,
        book: TrialBook,
        budget: Budget,
    ) -> None:
        self.inputs, self.strategy, self.book, self.budget = inputs, strategy, book, budget
        compiler: Compiler = inputs.compiler
        self.jobs = max(1, inputs.opts.jobs or compiler.jobs or inputs.settings.jobs or 4)
        # builds of the strategy's next generation, started while this one is measured
        self._ahead: dict[BuildGroup, Future[Build]] = {}

    def compile_ahead(
        self,
        new: Sequence[Candidate],
        left: Sequence[int],
        futures: dict[int, Future[Build]],
        shared: dict[BuildGroup, Future[Build]],
    ) -> None:
        """Keep ``jobs + 1`` distinct builds of this generation compiling (or queued), and
        up to ``AHEAD_PER_JOB x jobs`` of the next ones where the strategy can name them.

        A build that is done no longer counts: nothing runs here while a measurement
        blocks, so the queue must be deep enough to keep the compiler busy through it,
        not stop at jobs + 1 with finished builds. A candidate whose build another one
        already requested (they differ only in runtime genes) gets that future:
        submitting it again would hold a compile slot while it waits for the same build.
        """
        inputs = self.inputs
        busy = {id(futures[j]) for j in left if j in futures and not futures[j].done()}
        for j in left:
            if len(busy) > self.jobs:
                return
            if j in futures:
                continue
            group = inputs.spec.space.build_group(new[j].genes)
            if group not in shared:
                ahead = self._ahead.pop(group, None)
                shared[group] = ahead or inputs.compiler.submit(new[j], inputs.problem)
            futures[j] = shared[group]
            if not futures[j].done():
                busy.add(id(futures[j]))
        self.queue_ahead(len(left), shared)

    def start_ahead(self, cands: Sequence[Candidate]) -> None:
        """Start the builds of candidates a later batch will hold (a warm start's, the
        strategy's guessed first generation) while the baseline compiles: the batch takes
        each as its own build, so its trial records the compile, as if made in the batch."""
        inputs = self.inputs
        for cand in cands:
            group = inputs.spec.space.build_group(cand.genes)
            if group not in self._ahead and cand.key() not in self.book.cache:
                self._ahead[group] = inputs.compiler.submit(cand, inputs.problem)

    def queue_ahead(self, left: int, shared: dict[BuildGroup, Future[Build]] | None = None) -> None:
        """Keep ``AHEAD_PER_JOB x jobs`` builds of later generations compiling or queued
        (``left``: candidates of this generation, or the baseline, still to measure)."""
        pending = sum(1 for f in self._ahead.values() if not f.done())
        self._compile_next_generation(left, AHEAD_PER_JOB * self.jobs - pending, shared or {})

    def _compile_next_generation(
        self, left: int, slots: int, shared: dict[BuildGroup, Future[Build]]
    ) -> None:
        """Queue up to ``slots`` more builds of the next generations when the strategy can
        say what it will propose (:meth:`ExhaustiveStrategy.upcoming`): the measurer then
        finds them built when a generation starts. Never past the budget."""
        # never past the budget: what is ahead already, done or not, counts
        total = min(len(self._ahead) + slots, self.budget.remaining() - left)
        if total <= len(self._ahead) or self.budget.out_of_time():
            return
        inputs = self.inputs
        for cand in self.strategy.upcoming(total):
            if len(self._ahead) >= total:
                return
            group = inputs.spec.space.build_group(cand.genes)
            fresh = cand.key() not in self.book.cache
            if group not in self._ahead and group not in shared and fresh:
                self._ahead[group] = inputs.compiler.submit(cand, inputs.problem)


class Fillers:
    """Runtime-gene variants of built candidates, measured while every build compiles."""

    def __init__(
        self, inputs: RunInputs, filler: Filler, book: TrialBook, budget: Budget, notices: Notices
    ) -> None:
        self.inputs, self.filler, self.book = inputs, filler, book
        self.budget, self.notices = budget, notices
        # compile-only objectives cannot tell runtime variants apart: nothing to fill with
        self.on = inputs.search_plan.fill and filler.active and inputs.objective.measures

    def pick(self, avoid: set[str]) -> Candidate | None:
        """A filler, if filling is on and the clock leaves room for one."""
        if not self.on or self.budget.out_of_time():
            return None
        return self.filler.pick([t for _, t in self.book.front.members], self.book.cache, avoid)

    def build(self, cand: Candidate, timers: Timers, in_line: bool) -> Build | None:
        """The filler's build: its parent's. ``in_line`` (one measure slot): asked of the
        compiler, a cache hit, the wait counted as compile wait; a build made anew stops
        filling (the compiler passes runtime genes to nvcc, or lost its cache). Otherwise
        only a build at hand (``lookup``): the scheduler never blocks while others measure.
        """
        inputs = self.inputs
        if not in_line:
            return inputs.compiler.lookup(cand, inputs.problem)
        start = inputs.clock()
        build = inputs.compiler.build(cand, inputs.problem)
        timers.compile_wait_s += inputs.clock() - start
        if not build.cache_hit:
            self.on = False
            self.notices.note(
                "filling stopped: a runtime-gene variant of a built candidate was compiled "
                "anew, so fillers are not cheap with this compiler"
            )
        return build


class MeasureTimer:
    """``measure_s``: each measurement's time in flight, from its start to its end on the
    search's clock, summed (with several slots, GPU time: it can exceed the wall time).
    Measurements end in other threads, hence the lock; one that has not ended when the
    batch does counts until then."""

    def __init__(self, timers: Timers, clock: Callable[[], float]) -> None:
        self.timers, self.clock = timers, clock
        self._lock = threading.Lock()
        self._since: dict[int, float] = {}  # a measurement in flight -> when it started
        self._next = 0

    def begin(self) -> int:
        with self._lock:
            self._next += 1
            self._since[self._next] = self.clock()
            return self._next

    def end(self, ticket: int) -> None:
        with self._lock:
            since = self._since.pop(ticket, None)
            if since is not None:
                self.timers.measure_s += self.clock() - since

    def close(self) -> None:
        """The batch is over: what still runs (cancelled, forgotten) counts until now."""
        for ticket in list(self._since):
            self.end(ticket)


@dataclasses.dataclass
class _Filler:
    candidate: Candidate
    build: Build
    run: Future[Measurement] | None  # None: nothing to measure (a trial answers it, or failed)
    identity: str | None  # its binary's (dedup.py), kept for the batch's candidates to see


class Scheduler:
    """One batch: ``run()`` returns its trials in journal order, fillers included."""

    def __init__(
        self,
        inputs: RunInputs,
        state: tuple[TrialBook, Budget, Timers, RunStatus],
        stages: Stages,
        compiles: CompileSlots,
        fillers: Fillers,
        new: Sequence[Candidate],
        generation: int,
    ) -> None:
        self.inputs = inputs
        self.book, self.budget, self.timers, self.status = state
        self.stages, self.compiles, self.supply = stages, compiles, fillers
        self.new, self.generation = new, generation
        measures = inputs.objective.measures and inputs.measurer is not None
        self.measurer: Measurer | None = inputs.measurer if measures else None
        self.slots = self.measurer.slots if self.measurer is not None else 1
        self.in_line = self.slots == 1  # measured in line, journaled as measured
        self.timer = MeasureTimer(self.timers, inputs.clock)
        self.futures: dict[int, Future[Build]] = {}
        self.shared: dict[BuildGroup, Future[Build]] = {}
        self.left = list(range(len(new)))  # not journaled yet, in batch order
        self.started: dict[int, Future[Measurement] | None] = {}  # None: nothing to measure
        self.fillers: list[_Filler] = []
        self.pending = {c.key() for c in new}
        self.done: list[Trial] = []
        # binary identity -> the index measuring it; index -> the index whose run it takes
        self.measuring: dict[str, int] = {}
        self.twin_of: dict[int, int] = {}

    def run(self) -> list[Trial]:
        try:
            while self.left:
                if self.status.stop_requested and not self._head_started():
                    break
                if self.done and self.budget.out_of_time():
                    break
                if not self.status.stop_requested:
                    self.compiles.compile_ahead(self.new, self.left, self.futures, self.shared)
                    self._start_ready()
                    self._start_fillers()
                    # measuring in line takes time, in which builds end: refill their slots
                    # before any wait, or the batch's next builds would wait with them
                    self.compiles.compile_ahead(self.new, self.left, self.futures, self.shared)
                if not self._journal_finished():
                    self._wait()
        finally:
            for future in [*self.futures.values(), *self.started.values()]:
                if future is not None:
                    future.cancel()  # not started yet: dropped; running compiles finish
            for filler in self.fillers:
                if filler.run is not None:
                    filler.run.cancel()
            if self.measurer is not None and not self.in_line:
                self.measurer.forget()
            self.timer.close()
        return self.done

    # --- slots -------------------------------------------------------------------------
    def _busy(self) -> int:
        """Measure slots taken: with one slot, until its trial is journaled; with several,
        while the measurement runs (the journal waits for the batch's head)."""
        if self.in_line:
            return len(self.started) + len(self.fillers)
        running = [f for f in self.started.values() if f is not None and not f.done()]
        return len(running) + sum(f.run is not None and not f.run.done() for f in self.fillers)

    def _head_started(self) -> bool:
        return bool(self.left) and self.left[0] in self.started

    def _launch(self, cand: Candidate, build: Build) -> Future[Measurement]:
        """Measure ``cand``: in line with one slot, started with several."""
        measurer = self.measurer
        assert measurer is not None  # only measurable builds are launched
        plan = self.stages.plan(self.generation)  # pruning fixed for the generation
        ticket = self.timer.begin()
        try:
            if self.in_line:
                future: Future[Measurement] = Future()
                future.set_result(
                    measurer.measure(self.inputs.spec, cand, build, self.inputs.problem, plan)
                )
            else:
                future = measurer.start(self.inputs.spec, cand, build, self.inputs.problem, plan)
        except BaseException:
            self.timer.end(ticket)
            raise
        future.add_done_callback(lambda _: self.timer.end(ticket))
        return future

    def _prepared(self, cand: Candidate, build: Build) -> Build:
        """The build as ``evaluate`` will see it: this candidate's, within the device."""
        if build.candidate_key != cand.key():  # another candidate's build, shared
            build = dataclasses.replace(build, candidate_key=cand.key(), cache_hit=True)
        return self.stages.within_device(cand, build)

    def _measurable(self, build: Build) -> bool:
        return build.outcome.is_ok and self.measurer is not None

    # --- starting ------------------------------------------------------------------------
    def _start_ready(self) -> None:
        """Start the built candidates, in batch order, while a measure slot is free."""
        for j in self.left:
            if self._busy() >= self.slots:
                return
            future = self.futures.get(j)
            if j not in self.started and future is not None and future.done():
                self._start(j)

    def _start(self, j: int) -> None:
        cand = self.new[j]
        build = self._prepared(cand, self.futures[j].result())
        cover: Cover = self._cover(j, cand, build) if self._measurable(build) else "nothing"
        if cover == "wait":
            return
        self.started[j] = self._launch(cand, build) if cover == "measure" else None

    def _cover(self, j: int, cand: Candidate, build: Build) -> Cover:
        """What measures candidate ``j``'s binary: "measure" (nothing yet: start it),
        "covered" (a trial of the search, or another candidate's run started in this
        batch) or "wait" (a filler that is being measured)."""
        table = self.book.binaries
        identity = table.identity(cand, build)
        if identity is None:
            return "measure"
        if table.source(identity) is not None:
            return "covered"
        if any(f.identity == identity and f.run is not None for f in self.fillers):
            return "wait"
        first = self.measuring.setdefault(identity, j)
        if first == j:
            return "measure"
        self.twin_of[j] = first
        return "covered"

    def _start_fillers(self) -> None:
        """A free slot and no build to measure: a filler, its parent's build reused."""
        ready = any(
            j not in self.started and j in self.futures and self.futures[j].done()
            for j in self.left
        )
        while not ready and self._busy() < self.slots:
            avoid = self.pending | {f.candidate.key() for f in self.fillers}
            cand = self.supply.pick(avoid)
            if cand is None:
                return
            build = self.supply.build(cand, self.timers, self.in_line)
            if build is None:  # its build is not at hand: not a cheap filler now
                return
            build = self._prepared(cand, build)
            identity = self.book.binaries.identity(cand, build)
            run: Future[Measurement] | None = None
            if self._measurable(build) and self.book.binaries.source(identity) is None:
                if identity is not None and identity in self.measuring:
                    return  # a batch candidate's run will be its source
                run = self._launch(cand, build)
            self.fillers.append(_Filler(cand, build, run, identity))

    # --- journaling ----------------------------------------------------------------------
    def _evaluate(
        self, cand: Candidate, build: Build, filler: bool, run: Future[Measurement] | None
    ) -> None:
        """Score and journal: ``run`` is the candidate's measurement (its own or a twin's);
        None: a trial of this binary answers it, or there is nothing to measure."""
        measured = run.result() if run is not None else None
        self.done.append(self.stages.evaluate(cand, build, self.generation, filler, measured))

    def _run_of(self, j: int) -> Future[Measurement] | None:
        """The measurement candidate ``j`` is journaled with: its own, or that of a twin
        later in the batch (not journaled yet); None: nothing to wait for."""
        own = self.started.get(j)
        twin = self.twin_of.get(j)
        if own is None and twin is not None and twin in self.started:
            return self.started[twin]
        return own

    def _journal_finished(self) -> bool:
        """Journal finished fillers, then the candidates: with one slot as measured, with
        several the batch's head while it is finished."""
        progressed = False
        for filler in [f for f in self.fillers if f.run is None or f.run.done()]:
            self.fillers.remove(filler)
            self._evaluate(filler.candidate, filler.build, True, filler.run)
            progressed = True
        order = list(self.started) if self.in_line else self.left
        for j in list(order):
            if j not in self.started:
                break
            measuring = self._run_of(j)
            if measuring is not None and not measuring.done():
                break
            self.left.remove(j)
            self.started.pop(j)
            self._evaluate(self.new[j], self.futures.pop(j).result(), False, measuring)
            progressed = True
        return progressed

    def _wait(self) -> None:
        """Until a measurement or a compile ends. With every slot idle and no build ready,
        until the first of the batch's builds ends, counted as compile wait: never only
        the head's, since a slow head would hold up the builds done meanwhile and those
        not yet submitted. A wait looks at the Ctrl-C flag every ``POLL_S``: a stop starts
        nothing new."""
        compiling: list[Future[Any]] = [
            self.futures[j] for j in self.left if j in self.futures and not self.futures[j].done()
        ]
        measuring: list[Future[Any]] = [
            f for f in self.started.values() if f is not None and not f.done()
        ]
        measuring += [f.run for f in self.fillers if f.run is not None and not f.run.done()]
        if measuring:
            wait([*measuring, *compiling], timeout=POLL_S, return_when=FIRST_COMPLETED)
            return
        head = self.left[0]
        if head in self.started or head not in self.futures or not compiling:
            return  # a twin's run ended meanwhile, a build is ready; or a stop: the loop ends
        start = self.inputs.clock()
        try:
            self._until_a_build_ends(compiling)
        finally:
            self.timers.compile_wait_s += self.inputs.clock() - start

    def _until_a_build_ends(self, compiling: Sequence[Future[Any]]) -> None:
        """Block until one of ``compiling`` is done, or a stop is asked for. Polled through
        the first one's ``result(timeout)``, which a simulated compile answers by moving its
        clock (``ctune.testing.slow_builds``); the others are looked at after each poll."""
        while not any(f.done() for f in compiling):
            if self.status.stop_requested:
                return
            with contextlib.suppress(FutureTimeout):
                compiling[0].result(timeout=POLL_S)


__all__ = ["AHEAD_PER_JOB", "CompileSlots", "Fillers", "MeasureTimer", "Scheduler", "Stages"]
