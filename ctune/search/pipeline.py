"""From a built candidate to a trial: the device check, measure, score, journal, announce.

A batch goes through the scheduler (``scheduler.py``: compile slots, measure slots,
fillers, one measurement per binary); each of its candidates comes back here to be
checked against the device, scored by the objective spec, journaled and announced. The
generation's sampling plan (its pruning threshold) is decided here, once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctune.measure import SamplingPlan
from ctune.records import Build, Candidate, Measurement, Outcome, Trial
from ctune.search.dedup import shared_trial
from ctune.search.events import TrialFinished
from ctune.search.filling import Filler
from ctune.search.pruning import prune_threshold_ms, search_phase_plan
from ctune.search.scheduler import CompileSlots, Fillers, Scheduler
from ctune.spec.space.limits import launch_violation

if TYPE_CHECKING:
    from ctune.search.journal_writer import JournalWriter
    from ctune.search.run_state import SearchRun


class Pipeline:
    """The path of a candidate through compile, measure, score and the journal."""

    def __init__(
        self, run: SearchRun, writer: JournalWriter, filler: Filler, confirms: bool
    ) -> None:
        """``filler`` picks the runtime-gene variants (it learns from every trial the book
        accounts); ``confirms``: will confirmation re-measure the result (then the search
        samples less, ``pruning.py``)."""
        self.run = run
        self.writer = writer
        self.confirms = confirms
        inputs = run.inputs
        self.compiles = CompileSlots(inputs, run.strategy, run.book, run.budget)
        self.fillers = Fillers(inputs, filler, run.book, run.budget, run.notices)
        self._plans: tuple[int, SamplingPlan] | None = None  # (generation, its plan)

    @property
    def jobs(self) -> int:
        """Builds compiled at once."""
        return self.compiles.jobs

    # --- one candidate ----------------------------------------------------------------------
    def make_trial(
        self, cand: Candidate, build: Build, measurement: Measurement | None, generation: int
    ) -> Trial:
        """The trial of a build and its measurement, scored by the objective spec."""
        run = self.run
        number = len(run.book.trials)
        if not build.outcome.is_ok:
            return Trial(number, generation, cand, build.outcome, build, None)
        if measurement is not None and not measurement.outcome.is_ok:
            return Trial(number, generation, cand, measurement.outcome, build, measurement)
        values, violations = run.inputs.objective.evaluate(
            build, measurement, run.inputs.problem.dims
        )
        return Trial(
            number, generation, cand, build.outcome, build, measurement, values, violations
        )

    def measure(self, cand: Candidate, build: Build, plan: SamplingPlan) -> Measurement | None:
        run = self.run
        if (
            not build.outcome.is_ok
            or not run.inputs.objective.measures
            or run.inputs.measurer is None
        ):
            return None
        start = run.inputs.clock()
        try:
            return run.inputs.measurer.measure(
                run.inputs.spec, cand, build, run.inputs.problem, plan
            )
        finally:
            run.timers.measure_s += run.inputs.clock() - start

    def plan(self, generation: int) -> SamplingPlan:
        """The run's sampling plan, with the pruning threshold set by the leader as the
        generation began: fixed for the generation, so the order in which its builds
        finish (which load decides) cannot change what is pruned, and one seed proposes
        the same candidates locally and through an engine."""
        if self._plans is not None and self._plans[0] == generation:
            return self._plans[1]
        run = self.run
        threshold = prune_threshold_ms(
            run.inputs.objective,
            run.book.front.best(),
            run.inputs.opts.prune_margin,
            run.inputs.objective.context(run.inputs.problem.dims),
        )
        plan = self._search_phase(threshold)
        self._plans = (generation, plan)
        return plan

    def baseline_plan(self) -> SamplingPlan:
        """The baseline's plan: the search phase's, with no threshold (nothing leads yet).
        Where confirmation runs, it re-measures the baseline with the protocol's full plan
        as it does the leader; the search's own value only starts the pruning."""
        return self._search_phase(None)

    def _search_phase(self, threshold: float | None) -> SamplingPlan:
        run = self.run
        return search_phase_plan(
            run.status.sampling, threshold, run.inputs.opts.search_rep_ms, self.confirms
        )

    def within_device(self, cand: Candidate, build: Build) -> Build:
        """The build, or INVALID when the device cannot launch it (its resources are known
        only now: registers and static shared memory); never measured, infeasible."""
        if not build.outcome.is_ok:
            return build
        run = self.run
        why = launch_violation(
            run.inputs.limits,
            run.inputs.spec,
            cand.as_dict(),
            run.inputs.problem.dims,
            build.resources,
        )
        if why is None:
            return build
        return dataclasses.replace(build, outcome=Outcome.INVALID, log_tail=f"device limit: {why}")

    def evaluate(
        self,
        cand: Candidate,
        build: Build,
        generation: int,
        filler: bool = False,
        measured: Measurement | None = None,
    ) -> Trial:
        """Measure, score, journal and announce one candidate whose build is done; one
        whose binary this search measured already takes that measurement instead.
        ``measured``: this binary's measurement, taken under another candidate's key that
        is not journaled yet (a twin on another GPU): it is this candidate's run."""
        run = self.run
        book = run.book
        if build.candidate_key != cand.key():  # another candidate's build, shared
            build = dataclasses.replace(build, candidate_key=cand.key(), cache_hit=True)
        build = self.within_device(cand, build)
        source = book.binaries.source(book.binaries.identity(cand, build))
        if source is not None:
            trial = shared_trial(source, cand, build, len(book.trials), generation)
            self.writer.record(trial, filler, same_as=source.candidate.key())
        else:
            if measured is not None:
                measurement: Measurement | None = dataclasses.replace(
                    measured, candidate_key=cand.key()
                )
            else:
                measurement = self.measure(cand, build, self.plan(generation))
            trial = self.make_trial(cand, build, measurement, generation)
            self.writer.record(trial, filler)
        run.timers.session_evals += 1
        run.notices.emit(TrialFinished(trial, run.progress(), filler))
        book.check_first_failures(run.inputs.opts.first_failures)
        return trial

    # --- a batch ----------------------------------------------------------------------------
    def evaluate_batch(self, new: Sequence[Candidate], generation: int) -> list[Trial]:
        """Compile ahead, measure each build when ready, fill while all compile: the
        trials in journal order, fillers included; stops early on time (``scheduler.py``).
        A resumed generation that a stop cut short takes its journaled trials first
        (``JournalWriter.take``: fillers too, as when they were run) and runs the rest."""
        run = self.run
        journaled: list[Trial] = []
        if self.writer.held:
            # the generation's pruning threshold, from the leader as the generation began
            # (as when it ran: before any of its trials was journaled)
            self.plan(generation)
            journaled = self.writer.take()
            run.book.check_first_failures(run.inputs.opts.first_failures)
            done = {t.candidate.key() for t in journaled}
            new = [c for c in new if c.key() not in done]
        state = (run.book, run.budget, run.timers, run.status)
        batch = Scheduler(run.inputs, state, self, self.compiles, self.fillers, new, generation)
        return journaled + batch.run()

    def start_ahead(self, cands: Sequence[Candidate]) -> None:
        """Build candidates of a later batch now (``CompileSlots.start_ahead``)."""
        self.compiles.start_ahead(cands)

    def queue_ahead(self, left: int) -> None:
        """Keep builds of later generations compiling while ``left`` candidates (the
        baseline) are measured (``CompileSlots.queue_ahead``)."""
        self.compiles.queue_ahead(left)


__all__ = ["Pipeline"]
