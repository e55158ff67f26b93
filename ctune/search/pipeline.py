"""From candidates to trials: compile ahead, measure when built, fill while all compile.

One generation's new candidates are compiled ahead, ``jobs`` builds at a time
(``submit`` futures): while the GPU measures one candidate, the next builds compile.
Candidates that differ only in runtime genes share one build, so the second waits on
the first's future instead of taking a compile slot (and running nvcc again). Each is
measured serially on the one GPU as soon as its build is ready (batch order among the
ready ones), scored by the objective spec and journaled. While every build the batch
waits for is still compiling, the GPU measures fillers instead (``filling.py``).
A measurer with several GPUs measures that many at once (``concurrent_batch.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from ctune.measure import SamplingPlan
from ctune.records import Build, Candidate, Measurement, Outcome, Trial
from ctune.search.dedup import shared_trial
from ctune.search.events import TrialFinished
from ctune.search.filling import Filler
from ctune.search.pruning import prune_threshold_ms, search_phase_plan
from ctune.space.limits import launch_violation
from ctune.space.params import BuildGroup

if TYPE_CHECKING:
    from ctune.search.driver import _Run


#: builds of later generations queued per compile job, beyond this generation's (only for
#: a strategy that names its next candidates: ``ExhaustiveStrategy.upcoming``)
AHEAD_PER_JOB = 4


class Pipeline:
    """The path of a candidate through compile, measure, score and the journal."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        opts, compiler = run.opts, run.compiler
        self.jobs = max(1, opts.jobs or compiler.jobs or run.settings.jobs or 4)
        directions = run.objective.directions
        self.filler = Filler(run.spec.name, run.space, run.problem.dims, directions)
        # compile-only objectives cannot tell runtime variants apart: nothing to fill with
        self.filling = run.search_plan.fill and self.filler.active and run.objective.measures
        self._plans: tuple[int, SamplingPlan] | None = None  # (generation, its plan)
        # builds of the strategy's next generation, started while this one is measured
        self._ahead: dict[BuildGroup, Future[Build]] = {}

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
        values, violations = run.objective.evaluate(build, measurement, run.problem.dims)
        return Trial(
            number, generation, cand, build.outcome, build, measurement, values, violations
        )

    def measure(self, cand: Candidate, build: Build, plan: SamplingPlan) -> Measurement | None:
        run = self.run
        if not build.outcome.is_ok or not run.objective.measures or run.measurer is None:
            return None
        start = run.clock()
        try:
            return run.measurer.measure(run.spec, cand, build, run.problem, plan)
        finally:
            run.timers.measure_s += run.clock() - start

    def plan(self, generation: int) -> SamplingPlan:
        """The run's sampling plan, with the pruning threshold set by the leader as the
        generation began: fixed for the generation, so the order in which its builds
        finish (which load decides) cannot change what is pruned, and one seed proposes
        the same candidates locally and through an engine."""
        if self._plans is not None and self._plans[0] == generation:
            return self._plans[1]
        run = self.run
        threshold = prune_threshold_ms(
            run.objective,
            run.book.front.best(),
            run.opts.prune_margin,
            run.objective.context(run.problem.dims),
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
            run.plan, threshold, run.opts.search_rep_ms, run.confirmation.can_confirm()
        )

    def within_device(self, cand: Candidate, build: Build) -> Build:
        """The build, or INVALID when the device cannot launch it (its resources are known
        only now: registers and static shared memory); never measured, infeasible."""
        if not build.outcome.is_ok:
            return build
        run = self.run
        why = launch_violation(
            run.limits, run.spec, cand.as_dict(), run.problem.dims, build.resources
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
            run.session.record(trial, filler, same_as=source.candidate.key())
        else:
            if measured is not None:
                measurement: Measurement | None = dataclasses.replace(
                    measured, candidate_key=cand.key()
                )
            else:
                measurement = self.measure(cand, build, self.plan(generation))
            trial = self.make_trial(cand, build, measurement, generation)
            run.session.record(trial, filler)
        run.timers.session_evals += 1
        run.emit(TrialFinished(trial, run.progress(), filler))
        book.check_first_failures(run.opts.first_failures)
        return trial

    # --- a batch ----------------------------------------------------------------------------
    def evaluate_batch(self, new: Sequence[Candidate], generation: int) -> list[Trial]:
        """Compile ahead, measure each build when ready, fill while all compile.

        Returns the trials in journal order, fillers included; stops early on time.
        A measurer with several GPUs (``slots``) measures that many at once (``scale/``).
        """
        run = self.run
        if run.measurer is not None and run.measurer.slots > 1 and run.objective.measures:
            from ctune.search.concurrent_batch import evaluate_concurrently

            return evaluate_concurrently(run, new, generation)
        futures: dict[int, Future[Build]] = {}
        shared: dict[BuildGroup, Future[Build]] = {}
        left = list(range(len(new)))  # not measured yet, in batch order
        pending = {c.key() for c in new}
        done: list[Trial] = []
        try:
            while left:
                if run.stop_requested:
                    break
                if done and run.budget.out_of_time():
                    break
                self.compile_ahead(new, left, futures, shared)
                i = next((j for j in left if j in futures and futures[j].done()), None)
                if i is None:
                    filler = self.pick_filler(pending)
                    if filler is not None:
                        done.append(self.evaluate_filler(filler, generation))
                        continue
                    i = left[0]
                left.remove(i)
                start = run.clock()
                build = futures.pop(i).result()
                run.timers.compile_wait_s += run.clock() - start
                done.append(self.evaluate(new[i], build, generation))
        finally:
            for future in futures.values():
                future.cancel()  # not started yet: dropped; running compiles finish into the cache
        return done

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
        blocks (the first one waits for its worker, ~1.7 s on an H200), so the queue must
        be deep enough to keep the compiler busy through it, not stop at jobs + 1 with
        finished builds. A candidate whose build another one already requested (they
        differ only in runtime genes) gets that future: submitting it again would hold a
        compile slot while it waits for the same build.
        """
        run = self.run
        busy = {id(futures[j]) for j in left if j in futures and not futures[j].done()}
        for j in left:
            if len(busy) > self.jobs:
                return
            if j in futures:
                continue
            group = run.spec.space.build_group(new[j].genes)
            if group not in shared:
                ahead = self._ahead.pop(group, None)
                shared[group] = ahead or run.compiler.submit(new[j], run.problem)
            futures[j] = shared[group]
            if not futures[j].done():
                busy.add(id(futures[j]))
        self.queue_ahead(len(left), shared)

    def queue_ahead(self, left: int, shared: dict[BuildGroup, Future[Build]] | None = None) -> None:
        """Keep ``AHEAD_PER_JOB x jobs`` builds of later generations compiling or queued
        (``left``: candidates of this generation, or the baseline, still to measure)."""
        pending = sum(1 for f in self._ahead.values() if not f.done())
        self.compile_next_generation(left, AHEAD_PER_JOB * self.jobs - pending, shared or {})

    def compile_next_generation(
        self, left: int, slots: int, shared: dict[BuildGroup, Future[Build]]
    ) -> None:
        """Queue up to ``slots`` more builds of the next generations when the strategy can
        say what it will propose (:meth:`ExhaustiveStrategy.upcoming`): the measurer then
        finds them built when a generation starts. Never past the budget."""
        run = self.run
        upcoming = getattr(run.strategy, "upcoming", None)
        # never past the budget: what is ahead already, done or not, counts
        total = min(len(self._ahead) + slots, run.budget.remaining() - left)
        if upcoming is None or total <= len(self._ahead) or run.budget.out_of_time():
            return
        for cand in upcoming(total):
            if len(self._ahead) >= total:
                return
            group = run.spec.space.build_group(cand.genes)
            if (
                group not in self._ahead
                and group not in shared
                and cand.key() not in run.book.cache
            ):
                self._ahead[group] = run.compiler.submit(cand, run.problem)

    # --- fillers ----------------------------------------------------------------------------
    def pick_filler(self, pending: set[str]) -> Candidate | None:
        """A filler, if filling is on and the clock leaves room for one."""
        if not self.filling:
            return None
        if self.run.budget.out_of_time():
            return None
        book = self.run.book
        return self.filler.pick([t for _, t in book.front.members], book.cache, pending)

    def evaluate_filler(self, cand: Candidate, generation: int) -> Trial:
        run = self.run
        start = run.clock()
        build = run.compiler.build(cand, run.problem)  # the parent's build: a cache hit
        run.timers.compile_wait_s += run.clock() - start
        if not build.cache_hit:
            # the compiler built it anew: it passes runtime genes to nvcc, or lost its cache
            self.filling = False
            run.note(
                "filling stopped: a runtime-gene variant of a built candidate was compiled "
                "anew, so fillers are not cheap with this compiler"
            )
        return self.evaluate(cand, build, generation, filler=True)


__all__ = ["Pipeline"]
