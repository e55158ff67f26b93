"""One search's inputs and state, as the stages of the loop see them.

``RunInputs`` is what is fixed for the run (the spec, the problem, the space within the
device, the objective, the options and the plan, the compiler and measurer); the state
objects change as it goes: the trial book, the budget, the timers, the loop's status
(generation, stop reason, the sampling plan once the baseline settled its timing), the
notices (events and notes). A
stage takes the narrowest of these it uses; ``SearchRun`` bundles them for the stages
that use most of them (the pipeline, the session's start). This module imports none of
the stages, so that each imports it rather than the driver, or one another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctune.search.budget import Budget
from ctune.search.events import Note, Progress, SearchEvent
from ctune.search.timers import Timers
from ctune.search.trial_book import TrialBook

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.measure import Measurer, SamplingPlan
    from ctune.objective.spec import ObjectiveSpec
    from ctune.records import Trial
    from ctune.search import Compiler, Strategy
    from ctune.search.options import SearchOptions
    from ctune.search.plan import SearchPlan
    from ctune.spec import KernelSpec, Problem
    from ctune.spec.space.limits import DeviceLimits
    from ctune.spec.space.params import Space

log = logging.getLogger("ctune.search.driver")  # the notes keep the logger they were said on

EventSink = Callable[[SearchEvent], None]
#: (the journal's fingerprint, without GPU fields; the artifact's)
Fingerprints = tuple[dict[str, str], dict[str, str]]


def l2_policy(settings: Settings, spec: KernelSpec) -> str:
    """The L2 policy: --l2-policy / CTUNE_L2_POLICY / [tool.ctune] when given, else the
    spec's."""
    return settings.l2_policy or spec.l2_policy


def sampling_plan(settings: Settings, spec: KernelSpec, objective: ObjectiveSpec) -> SamplingPlan:
    """How a search samples each candidate: the settings' protocol, as the objective needs."""
    from ctune.measure import SamplingPlan

    base = SamplingPlan(
        warmup_ms=settings.warmup_ms,
        rep_ms=settings.rep_ms,
        l2_policy=l2_policy(settings, spec),
        energy_window_s=settings.energy_window_s,
        timing=settings.timing or spec.timing,
    )
    return objective.sampling_plan(base)


@dataclass(frozen=True)
class RunInputs:
    """What one search is given and derives before it starts; fixed for the run."""

    settings: Settings
    spec: KernelSpec
    objective: ObjectiveSpec
    opts: SearchOptions
    search_plan: SearchPlan  # strategy, options, seed, budget, time, patience, fill
    problem: Problem
    space: Space  # what the strategy and the filler may propose: the spec's, within the device
    limits: DeviceLimits
    compiler: Compiler
    measurer: Measurer | None
    clock: Callable[[], float]

    @property
    def strategy_name(self) -> str:
        return self.search_plan.strategy


@dataclass
class RunStatus:
    """Where the loop stands: what changes between generations, outside the book."""

    sampling: SamplingPlan  # the run's plan; ``auto`` timing becomes the baseline's method
    generation: int = 0
    stop_reason: str = ""
    stop_requested: bool = False  # the first Ctrl-C: finish the candidate in flight, stop


class Notices:
    """What the search says as it goes: events to the caller's sink, notes for the result."""

    def __init__(self, emit: EventSink) -> None:
        self.emit = emit
        self.notes: list[str] = []
        self.listened = False  # does a caller's sink show the notes (then they are not logged)

    def note(self, message: str, level: str = "warning") -> None:
        """Say ``message`` once: to the caller's event sink, else to the log."""
        shown = logging.WARNING if level == "warning" else logging.INFO
        log.log(logging.DEBUG if self.listened else shown, "%s", message)
        self.notes.append(message)
        self.emit(Note(message, level))


class SearchRun:
    """The inputs and the state objects of one search, for the stages that use most of
    them; the stages themselves (pipeline, journal, confirmation) are given separately."""

    def __init__(
        self,
        inputs: RunInputs,
        strategy: Strategy,
        emit: EventSink,
        fingerprints: Future[Fingerprints],
        observe: Callable[[Trial], None],
    ) -> None:
        self.inputs = inputs
        self.strategy = strategy
        self.notices = Notices(emit)
        self.status = RunStatus(sampling_plan(inputs.settings, inputs.spec, inputs.objective))
        self.timers = Timers(inputs.clock)
        self.book = TrialBook(inputs.spec, inputs.problem, inputs.objective.directions, observe)
        self.budget = Budget(inputs.search_plan, self.book, self.timers.elapsed)
        self._fingerprints = fingerprints

    def build_fingerprint(self) -> dict[str, str]:
        """The artifact fingerprint without the GPU (the device is checked on its own)."""
        return self._fingerprints.result()[0]

    def artifact_fingerprint(self) -> dict[str, str]:
        """The artifact's fingerprint: toolchain, harness, source, GPU."""
        return dict(self._fingerprints.result()[1])

    def note_device_limits(self, valid: int, total: int) -> None:
        """Say how many of the spec's ``total`` candidates the device's limits rule out, if
        any (``valid``: the search's space)."""
        inputs = self.inputs
        if total > valid:
            self.notices.note(
                f"device limits ({inputs.limits.source}) rule out {total - valid:,} of "
                f"{total:,} candidates before compiling",
                "info",
            )

    def progress(self) -> Progress:
        book = self.book
        failures, infeasible = book.failures()
        score, best, front = book.score()
        elapsed = self.timers.elapsed()
        several = len(self.inputs.objective.directions) > 1
        return Progress(
            generation=self.status.generation,
            evaluations=len(book.trials),
            budget=self.budget.limit,
            elapsed_s=elapsed,
            time_budget_s=self.inputs.search_plan.time_s,
            eta_s=self.budget.eta(elapsed, self.timers.session_evals),
            failures=failures,
            infeasible=infeasible,
            cached=book.cached,
            fillers=book.fillers,
            reused=book.reused_asked,
            skipped=book.skipped,
            best=best,
            hypervolume=-score if score is not None and several else None,
            front_size=front,
        )


__all__ = [
    "EventSink",
    "Fingerprints",
    "Notices",
    "RunInputs",
    "RunStatus",
    "SearchRun",
    "l2_policy",
    "sampling_plan",
]
