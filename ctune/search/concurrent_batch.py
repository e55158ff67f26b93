"""One generation on several GPUs: up to ``slots`` candidates measured at once.

Where the serial loop (``Pipeline.evaluate_batch``) measures one candidate at a time, this
keeps every GPU busy yet journals and tells the strategy in batch order, so the same seed
gives the same journal whichever GPU finishes first. Compile-ahead, fillers, one
measurement per binary and Ctrl-C behave as serially. The rules: docs/scale-out.md,
"Several GPUs of one host".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ctune.measure import Measurer
    from ctune.records import Build, Candidate, Measurement, Trial
    from ctune.search.driver import _Run
    from ctune.space.params import BuildGroup

POLL_S = 0.25  # how often a wait looks at the Ctrl-C flag


#: what measures a batch candidate's binary (``ConcurrentBatch._cover``)
Cover = Literal["measure", "covered", "wait", "nothing"]


@dataclasses.dataclass
class _Filler:
    candidate: Candidate
    build: Build
    measurement: Future[Measurement]
    identity: str | None  # its binary's (dedup.py), kept for the batch's candidates to see


class ConcurrentBatch:
    """The state of one batch; ``run()`` returns its trials in journal order."""

    def __init__(self, run: _Run, new: Sequence[Candidate], generation: int) -> None:
        self.run = run
        self.new = new
        self.generation = generation
        self.plan = run.pipeline.plan(generation)  # pruning fixed for the generation
        assert run.measurer is not None  # a batch that measures
        self.measurer: Measurer = run.measurer
        self.slots = self.measurer.slots
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

    def run_batch(self) -> list[Trial]:
        try:
            while self.left:
                if self.run.stop_requested and not self._head_started():
                    break
                if self.done and self.run.budget.out_of_time():
                    break
                if not self.run.stop_requested:
                    self.run.pipeline.compile_ahead(self.new, self.left, self.futures, self.shared)
                    self._start_ready()
                    self._start_fillers()
                if not self._journal_finished():
                    self._wait()
        finally:
            for future in [*self.futures.values(), *self.started.values()]:
                if future is not None:
                    future.cancel()
            for filler in self.fillers:
                filler.measurement.cancel()
            self.measurer.forget()
        return self.done

    # --- starting ------------------------------------------------------------------------
    def _busy(self) -> int:
        running = [f for f in self.started.values() if f is not None and not f.done()]
        return len(running) + sum(not f.measurement.done() for f in self.fillers)

    def _head_started(self) -> bool:
        return bool(self.left) and self.left[0] in self.started

    def _prepared(self, cand: Candidate, build: Build) -> Build:
        """The build as ``evaluate`` will see it: this candidate's, within the device."""
        if build.candidate_key != cand.key():
            build = dataclasses.replace(build, candidate_key=cand.key(), cache_hit=True)
        return self.run.pipeline.within_device(cand, build)

    def _measurable(self, build: Build) -> bool:
        return build.outcome.is_ok and self.run.objective.measures

    def _start_ready(self) -> None:
        run = self.run
        for j in self.left:
            if self._busy() >= self.slots:
                return
            future = self.futures.get(j)
            if j in self.started or future is None or not future.done():
                continue
            cand = self.new[j]
            build = self._prepared(cand, future.result())
            cover: Cover = self._cover(j, cand, build) if self._measurable(build) else "nothing"
            if cover == "wait":
                continue
            self.started[j] = (
                self.measurer.start(run.spec, cand, build, run.problem, self.plan)
                if cover == "measure"
                else None
            )

    def _cover(self, j: int, cand: Candidate, build: Build) -> Cover:
        """What measures candidate ``j``'s binary: "measure" (nothing yet: start it),
        "covered" (a trial of the search, or another candidate's run started in this
        batch) or "wait" (a filler that is being measured)."""
        table = self.run.book.binaries
        identity = table.identity(cand, build)
        if identity is None:
            return "measure"
        if table.source(identity) is not None:
            return "covered"
        if any(f.identity == identity for f in self.fillers):
            return "wait"
        first = self.measuring.setdefault(identity, j)
        if first == j:
            return "measure"
        self.twin_of[j] = first
        return "covered"

    def _start_fillers(self) -> None:
        """A free GPU and no build to measure: a filler whose build is already cached."""
        run = self.run
        ready = any(
            j not in self.started and j in self.futures and self.futures[j].done()
            for j in self.left
        )
        while not ready and self._busy() < self.slots:
            avoid = self.pending | {f.candidate.key() for f in self.fillers}
            cand = run.pipeline.pick_filler(avoid)
            if cand is None:
                return
            build = run.compiler.lookup(cand, run.problem)
            if build is None:  # its build is not at hand: not a cheap filler now
                return
            build = self._prepared(cand, build)
            if not self._measurable(build):
                return
            identity = run.book.binaries.identity(cand, build)
            if run.book.binaries.source(identity) is not None:
                self._evaluate(cand, build, filler=True)  # its binary's trial answers it
                continue
            if identity is not None and identity in self.measuring:
                return  # a batch candidate's run will be its source
            future = self.measurer.start(run.spec, cand, build, run.problem, self.plan)
            self.fillers.append(_Filler(cand, build, future, identity))

    # --- journaling ----------------------------------------------------------------------
    def _evaluate(
        self, cand: Candidate, build: Build, filler: bool, measured: Measurement | None = None
    ) -> None:
        """``evaluate`` (its measure() answered by the started measurement, or ``measured``:
        a twin's), GPU time kept once per run (a reuse of a binary's run spent none)."""
        run = self.run
        before = run.timers.measure_s
        trial = run.pipeline.evaluate(cand, build, self.generation, filler, measured)
        run.timers.measure_s = before  # evaluate timed the wait for the run, not the run
        if trial.measurement is not None and cand.key() not in run.book.binaries.same_as:
            run.timers.measure_s += trial.measurement.wall_s or 0.0
        self.done.append(trial)

    def _run_of(self, j: int) -> Future[Measurement] | None:
        """The measurement candidate ``j`` is journaled with: its own, or that of a twin
        later in the batch (not journaled yet); None: nothing to wait for."""
        own = self.started.get(j)
        twin = self.twin_of.get(j)
        if own is None and twin is not None and twin in self.started:
            return self.started[twin]
        return own

    def _journal_finished(self) -> bool:
        """Journal finished fillers, then the batch's head while it is finished."""
        progressed = False
        for filler in [f for f in self.fillers if f.measurement.done()]:
            self.fillers.remove(filler)
            self._evaluate(filler.candidate, filler.build, filler=True)
            progressed = True
        while self.left and self.left[0] in self.started:
            head = self.left[0]
            measuring = self._run_of(head)
            if measuring is not None and not measuring.done():
                break
            self.left.pop(0)
            own = self.started.pop(head)
            adopted = measuring if own is None else None  # a twin's run, if it has one
            self._evaluate(
                self.new[head],
                self.futures.pop(head).result(),
                filler=False,
                measured=adopted.result() if adopted is not None else None,
            )
            progressed = True
        return progressed

    def _wait(self) -> None:
        """Until a compile or a measurement ends (or a short while, to see Ctrl-C)."""
        measuring: list[Future[Any]] = [
            f for f in self.started.values() if f is not None and not f.done()
        ]
        measuring += [f.measurement for f in self.fillers if not f.measurement.done()]
        compiling: list[Future[Any]] = [
            self.futures[j] for j in self.left if j in self.futures and not self.futures[j].done()
        ]
        start = self.run.clock()
        if measuring or compiling:
            wait([*measuring, *compiling], timeout=POLL_S, return_when=FIRST_COMPLETED)
        else:  # nothing under way (a moment between a compile and its measurement)
            time.sleep(0.01)
        if not measuring:  # every GPU idle, waiting on builds
            self.run.timers.compile_wait_s += self.run.clock() - start


def evaluate_concurrently(run: _Run, new: Sequence[Candidate], generation: int) -> list[Trial]:
    """``evaluate_batch`` for a measurer with several GPUs (``slots > 1``)."""
    return ConcurrentBatch(run, new, generation).run_batch()


__all__ = ["ConcurrentBatch", "evaluate_concurrently"]
