"""THE search loop: ask -> dedup -> compile ahead -> measure -> score -> journal -> tell.

This is the only module that knows about parallelism and budgets (docs/design.md,
"the path of one candidate"). One generation at a time:

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
anything is compiled. The first Ctrl-C lets the candidate in flight finish
(its measurement is journaled), starts nothing new and returns what the
search has, marked ``interrupted`` (``--resume`` goes on from there); a
second Ctrl-C abandons the candidate in flight at once. Either way every
finished trial is already on disk.

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
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ctune.compile.logs import first_error_line
from ctune.errors import ToolchainError, UserError
from ctune.objective.pareto import dominates, sign
from ctune.records import Build, Candidate, Measurement, Outcome, Trial
from ctune.search import Compiler, Publisher, Strategy, make_strategy
from ctune.search import journal as journal_mod
from ctune.search.dedup import COMPILE_CAP_FACTOR, BinaryTable, shared_trial
from ctune.search.events import (
    BaselineMeasured,
    Confirming,
    GenerationFinished,
    Note,
    Progress,
    SearchEvent,
    SearchFinished,
    SearchStarted,
    TrialFinished,
)
from ctune.search.filling import Filler
from ctune.search.plan import DEFAULT_BUDGET, SearchPlan, new_plan, resume_plan
from ctune.search.result import COMPILE_ONLY, MemberResult, ResultRecord, SearchResult, Timing
from ctune.search.strategy import StrategyContext, min_form
from ctune.space.limits import DeviceLimits, device_limits, launch_violation
from ctune.space.params import BuildGroup

if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings
    from ctune.kernelspec import KernelSpec, Problem
    from ctune.measure import Measurer, SamplingPlan
    from ctune.objective.spec import ObjectiveSpec
    from ctune.search.confirm import ConfirmationCost
    from ctune.search.feasibility import Feasibility

log = logging.getLogger(__name__)

MAX_BATCH = 256
#: consecutive generations with nothing new before the search counts as converged
MAX_IDLE_GENERATIONS = 10
#: improvements smaller than this (relative) do not reset the patience counter
IMPROVEMENT_EPS = 1e-9
#: single objective: how many of the best are confirmed (a lucky measurement cannot win alone)
CONFIRM_TOP_SINGLE = 3
#: a warm start measures at most this many configurations without a budget (else a quarter)
WARM_START_MAX = 16

EventSink = Callable[[SearchEvent], None]


@dataclass(frozen=True)
class SearchOptions:
    """Everything about one search that is not a setting or the objective spec.

    None (and an empty ``strategy_options``) means not given: a new search takes the
    defaults (``auto``, seed 0, ``DEFAULT_BUDGET`` unless timed, filling on), a resumed
    one the values its journal recorded (``plan.py``).
    """

    problem: str | None = None
    strategy: str | None = None  # auto: ga for one objective, nsga2 for several
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


# --- capabilities --------------------------------------------------------------------------


def gpu_available(index: int = 0) -> bool:
    """Is CUDA device ``index`` visible (NVML, else CuPy)? Never raises."""
    try:
        from ctune.evidence.identity import probe_gpu

        if probe_gpu(index) is not None:
            return True
    except Exception:  # NVML missing or broken: try CuPy below
        pass
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > index)
    except Exception:  # no CuPy, no driver (or one too old), no device
        return False


def probe_capabilities() -> set[str]:
    """What this machine offers: "gpu" (a CUDA device) and "nvml" (energy counters)."""
    caps: set[str] = {"gpu"} if gpu_available() else set()
    try:
        from ctune.measure.nvml_energy import nvml_available

        if nvml_available():
            caps.add("nvml")
    except ImportError:
        pass
    return caps


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


# --- helpers ----------------------------------------------------------------------------


def device_label(measurement: Measurement | None) -> str | None:
    """The journal's device identity: model and SM, not the driver (which may update)."""
    if measurement is None or measurement.device is None:
        return None
    return f"{measurement.device.name} ({measurement.device.sm})"


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
    compiler: Any,
    measurer: Any,
    *,
    gpu: bool = True,
) -> dict[str, str]:
    """Stand-ins say what they are; the real path probes toolchain, source and GPU."""
    stand_in: dict[str, str] = {}
    for part in (compiler, measurer):
        fields = getattr(part, "fingerprint_fields", None)
        if callable(fields):
            stand_in.update(fields())
    from ctune.evidence import identity as fp

    if stand_in:
        return {
            **fp.harness_fields(),
            **fp.spec_part_fields(spec, problem),
            "arch": settings.arch or spec.arch,
            "l2_policy": _l2(settings, spec),
            **stand_in,
        }
    return fp.current_fingerprint(
        spec,
        gpu=gpu,
        problem=problem,
        nvcc=settings.nvcc,
        l2_policy=_l2(settings, spec),
        arch=settings.arch or None,
    )


class _FrontTracker:
    """The feasible non-dominated trials, updated one trial at a time.

    Recomputing the front over every trial after every trial would be
    quadratic per trial; progress is reported after each one.
    """

    def __init__(self, directions: tuple[str, ...]) -> None:
        self.directions = directions
        self.members: list[tuple[tuple[float, ...], Trial]] = []
        self._hv: float | None = None

    def add(self, trial: Trial) -> None:
        point = min_form(trial, self.directions)
        if point is None or any(dominates(q, point) for q, _ in self.members):
            return
        self.members = [(q, t) for q, t in self.members if not dominates(point, q)]
        self.members.append((point, trial))
        self._hv = None

    def best(self) -> Trial | None:
        if not self.members:
            return None
        return min(self.members, key=lambda m: (m[0][0], m[1].number))[1]

    def hypervolume(self, baseline: tuple[float, ...] | None) -> float | None:
        """In baseline-normalised losses (baseline at 1, reference at 2 in every objective)."""
        if not self.members:
            return None
        if self._hv is None:
            from ctune.objective.pareto import hypervolume

            base = baseline or (1.0,) * len(self.directions)
            scales = [abs(v) if v else 1.0 for v in base]
            rows = []
            for point, _ in self.members:
                row = [p / sc for p, sc in zip(point, scales, strict=True)]
                # max objectives are negated: -v/|b| -> 2 - v/|b| (baseline 1, zero at 2)
                rows.append(
                    [
                        2.0 + r if d == "max" else r
                        for r, d in zip(row, self.directions, strict=True)
                    ]
                )
            self._hv = hypervolume(rows, [2.0] * len(self.directions))
        return self._hv


# --- the run --------------------------------------------------------------------------------


class _Run:
    """State of one search; methods are the steps of the loop."""

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
        self.plan_conflict: str | None = None  # a flag --resume cannot honour (plan.py)
        self.strategy_name = plan.strategy
        self.budget = plan.budget
        self.jobs = max(
            1, opts.jobs or int(getattr(compiler, "jobs", 0) or 0) or settings.jobs or 4
        )
        self.cache: dict[str, Trial] = {}
        self.trials: list[Trial] = []  # in number order, baseline first
        self.front = _FrontTracker(objective.directions)
        self.outcomes: Counter[str] = Counter()
        self.infeasible = 0
        self.baseline: Trial | None = None
        self.journal: journal_mod.Journal | None = None
        self.header: dict[str, Any] = {}
        self.device: str | None = None
        self.device_checked = True
        self.generation = 0
        self.cached = 0
        self.stop_reason = ""
        self.notes: list[str] = []
        self.started = clock()
        self.resumed_s = 0.0  # search time the resumed journal already holds
        self.session_evals = 0
        self.compile_wait_s = 0.0
        self.measure_s = 0.0
        self.confirm_s = 0.0
        self.compile_cpu_s = 0.0
        self.best_score: float | None = None
        self.stale_generations = 0
        self.first_checked = False
        self.stop_requested = False  # the first Ctrl-C: finish the candidate in flight, stop
        self._fingerprint: dict[str, str] | None = None
        self.limits = limits
        # what the strategy and the filler may propose: the spec's space within the device
        self.space = limits.constrain(spec.space, spec.launch)
        self.filler = Filler(spec.name, self.space, self.problem.dims, objective.directions)
        # compile-only objectives cannot tell runtime variants apart: nothing to fill with
        self.filling = plan.fill and self.filler.active and objective.measures
        self.fillers = 0  # filler trials, resumed ones included
        self.binaries = BinaryTable(spec, self.problem)  # one measurement per binary
        self.reused_asked = 0  # asked trials answered by an identical binary (budget-free)
        self.confirmation: ConfirmationCost | None = None
        self.strategy: Strategy = make_strategy(
            self.strategy_name,
            StrategyContext(
                spec.name, self.space, dict(self.problem.dims), objective.directions, plan.seed
            ),
            plan.options,
        )

    # --- identity -----------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kernel": self.spec.name,
            "problem": self.problem.name,
            "space": journal_mod.space_identity(self.spec.space),
            "objectives": self.objective.identity(),
            "fingerprint": self.build_fingerprint(),
        }
        if self.device is not None:
            out["device"] = self.device
        return out

    def build_fingerprint(self) -> dict[str, str]:
        """The artifact fingerprint without the GPU (the device is checked on its own)."""
        if self._fingerprint is None:
            from ctune.evidence.identity import FIELDS

            every = _fingerprint(
                self.spec, self.problem.name, self.settings, self.compiler, None, gpu=False
            )
            self._fingerprint = {
                k: v for k, v in every.items() if FIELDS.get(k, ("", ""))[1] != "gpu"
            }
        return self._fingerprint

    def note(self, message: str, level: str = "warning") -> None:
        log.log(logging.WARNING if level == "warning" else logging.INFO, "%s", message)
        self.notes.append(message)
        self.emit(Note(message, level))

    # --- evaluation of one candidate ----------------------------------------------------------
    def make_trial(
        self, cand: Candidate, build: Build, measurement: Measurement | None, generation: int
    ) -> Trial:
        number = len(self.trials)
        if not build.outcome.is_ok:
            return Trial(number, generation, cand, build.outcome, build, None)
        if measurement is not None and not measurement.outcome.is_ok:
            return Trial(number, generation, cand, measurement.outcome, build, measurement)
        values, violations = self.objective.evaluate(build, measurement, self.problem.dims)
        return Trial(
            number, generation, cand, build.outcome, build, measurement, values, violations
        )

    def measure(self, cand: Candidate, build: Build) -> Measurement | None:
        if not build.outcome.is_ok or not self.objective.measures or self.measurer is None:
            return None
        start = self.clock()
        try:
            return self.measurer.measure(self.spec, cand, build, self.problem, self.plan)
        finally:
            self.measure_s += self.clock() - start

    def check_device(self, measurement: Measurement | None) -> None:
        """On resume, the first measurement proves the GPU is the journal's (else refuse)."""
        if self.device_checked or measurement is None or self.journal is None:
            return
        label = device_label(measurement)
        if label is not None:
            journal_mod.check_identity(self.journal.path, self.header, {"device": label})
            self.device_checked = True

    def record(self, trial: Trial, filler: bool = False, same_as: str | None = None) -> None:
        assert self.journal is not None
        self.check_device(trial.measurement)
        elapsed = self.resumed_s + self.elapsed()
        self.journal.append(trial, filler=filler, elapsed_s=elapsed, same_binary_as=same_as)
        self.add(trial, same_as)
        self.fillers += filler
        self.reused_asked += same_as is not None and not filler
        if trial.build is not None and not trial.build.cache_hit:
            self.compile_cpu_s += trial.build.compile_s

    def add(self, trial: Trial, same_as: str | None = None) -> None:
        """Account a finished (or replayed) trial: cache, binaries, counts, front.

        INVALID (a restriction or a device limit refused it, so it never ran) is
        infeasible, like a constraint the measurement broke; not a failure.
        """
        self.cache[trial.candidate.key()] = trial
        identity = None if same_as else self.binaries.identity(trial.candidate, trial.build)
        self.binaries.add(trial, identity, same_as)
        self.trials.append(trial)
        if trial.outcome is Outcome.INVALID or (trial.outcome.is_ok and not trial.feasible):
            self.infeasible += 1
        elif not trial.outcome.is_ok:
            self.outcomes[trial.outcome.value] += 1
        self.front.add(trial)
        self.filler.observe(trial)

    # --- baseline -----------------------------------------------------------------------------
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

    def within_device(self, cand: Candidate, build: Build) -> Build:
        """The build, or INVALID when the device cannot launch it (its resources are known
        only now: registers and static shared memory); never measured, infeasible."""
        if not build.outcome.is_ok:
            return build
        why = launch_violation(
            self.limits, self.spec, cand.as_dict(), self.problem.dims, build.resources
        )
        if why is None:
            return build
        return dataclasses.replace(build, outcome=Outcome.INVALID, log_tail=f"device limit: {why}")

    def baseline_trial(self) -> Trial:
        """Compile and measure the default build; any failure is the user's, before writing."""
        cand = self.spec.default_candidate()
        broken = self.space.violations(cand.as_dict(), self.problem.dims)
        if broken:
            raise UserError(
                f"{self.spec.yaml_path.name}: the default build breaks a device limit "
                f"({self.limits.source}): '{broken[0]}'; change the genes' defaults"
            )
        start = self.clock()
        build = self.compiler.build(cand, self.problem)
        self.compile_wait_s += self.clock() - start
        if not build.outcome.is_ok:
            raise UserError(
                f"{self.spec.source_path.name}: the default build (baseline) does not compile "
                f"({build.outcome.value}): {first_error_line(build.log_tail)}"
            )
        build = self.within_device(cand, build)
        if not build.outcome.is_ok:
            raise UserError(
                f"{self.spec.source_path.name}: the default build cannot launch: "
                f"{build.log_tail}; change the genes' defaults"
            )
        measurement = self.measure(cand, build)
        if measurement is not None and not measurement.outcome.is_ok:
            raise UserError(
                f"{self.spec.source_path.name}: the default build (baseline) fails on "
                f"{self.problem.name} ({measurement.outcome.value}): "
                f"{(measurement.error or 'no detail')[:300]}"
            )
        trial = self.make_trial(cand, build, measurement, 0)
        if trial.values is None:
            raise UserError(
                f"the objectives ({self.objective.describe()}) cannot be computed for the "
                "default build: the measurer returned no value for one of them"
            )
        return trial

    def settle_timing(self, baseline: Trial) -> None:
        """``auto`` becomes the method the baseline was timed with, for every later candidate:
        numbers compared within a search (and with its artifact) must mean the same thing."""
        m = baseline.measurement
        if self.plan.timing == "auto" and m is not None and m.timing_method in ("events", "graph"):
            self.plan = dataclasses.replace(self.plan, timing=m.timing_method)

    def open_new(self) -> None:
        trial = self.baseline_trial()
        self.settle_timing(trial)
        self.device = device_label(trial.measurement) or (
            COMPILE_ONLY if not self.objective.measures else "unknown"
        )
        path = self.opts.journal or journal_mod.default_path(
            self.settings.cache_dir, self.spec.name, self.problem.name
        )
        header = {
            **self.identity(),
            "info": {
                "strategy": self.strategy_name,
                "seed": self.search_plan.seed,
                "created_utc": journal_mod.utc_stamp(),
                "budget": self.budget,
            },
            "search": self.search_plan.to_json(),
        }
        self.header = header
        self.journal = journal_mod.Journal.create(path, header, self.opts.journal_fsync)
        self.record(trial)
        self.baseline = trial
        self.strategy.tell([trial])

    def open_resume(self, path: Path) -> None:
        journal, replay = journal_mod.Journal.resume(path, self.opts.journal_fsync)
        self.journal = journal
        self.header = replay.header
        self.resumed_s = replay.last_elapsed_s
        known = getattr(self.measurer, "device_name", None)
        self.device = known if isinstance(known, str) else None
        for change in journal_mod.check_identity(path, replay.header, self.identity()):
            self.note(change, "info")
        if self.plan_conflict is not None:
            raise UserError(self.plan_conflict)
        if self.device is None:
            self.device = str(replay.header.get("device", "unknown"))
            self.device_checked = not self.objective.measures
        if replay.dropped_tail:
            self.note(f"{path}: dropped a torn last line (the previous run stopped mid-write)")
        default_key = self.spec.default_candidate().key()
        for trial in replay.trials:
            trial = dataclasses.replace(trial, number=len(self.trials))
            key = trial.candidate.key()
            same_as = replay.same_binary.get(key)
            self.add(trial, same_as)
            self.fillers += key in replay.fillers
            self.reused_asked += same_as is not None and key not in replay.fillers
            if trial.candidate.key() == default_key and self.baseline is None:
                self.baseline = trial
        for group in journal_mod.trials_by_generation(self.trials):
            self.strategy.tell(group)
        if replay.states:
            self.strategy.load_state(replay.states[-1][1])
        self.generation = max((t.generation for t in self.trials), default=0)
        if self.baseline is None:
            trial = self.baseline_trial()
            self.record(trial)
            self.baseline = trial
            self.strategy.tell([trial])
        self.settle_timing(self.baseline)
        self.check_first_failures()

    def warm_start(self) -> None:
        """Measure the given configurations first, as one generation told to the strategy.

        They enter its selection pool like its own trials (a GA breeds from the best of
        them), count against the budget, and take at most a quarter of it: the search
        still explores. Those that are not valid points of this space are skipped.
        """
        given = self.opts.warm_start
        if not given:
            return
        from ctune.exchange.t4 import candidates

        found, skipped = candidates(self.spec.name, self.space, given, self.problem.dims)
        fresh = [c for c in found if c.key() not in self.cache]
        if self.budget is None:
            take = WARM_START_MAX
        else:
            take = min(max(1, self.budget // 4), self.budget - self.asked)
        chosen = fresh[: max(0, take)]
        if chosen:
            self.generation += 1
            finished = self.evaluate_batch(chosen, self.generation)
            self.strategy.tell(finished)
            assert self.journal is not None
            self.journal.append_state(self.generation, self.strategy.state())
        where = f" from {self.opts.warm_start_source}" if self.opts.warm_start_source else ""
        self.note(
            f"warm start{where}: {len(chosen)} of {len(given)} configurations measured first "
            f"({skipped} not valid here, {len(found) - len(fresh)} already tried)",
            "info",
        )

    # --- progress -----------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.clock() - self.started

    def failures(self) -> tuple[dict[str, int], int]:
        return dict(self.outcomes), self.infeasible

    def score(self) -> tuple[float | None, tuple[float, ...] | None, int]:
        """(score to minimise: best value or -hypervolume, best values, front size)."""
        size = len(self.front.members)
        if len(self.objective.directions) == 1:
            best = self.front.best()
            if best is None:
                return None, None, 0
            point = min_form(best, self.objective.directions)
            assert point is not None
            return point[0], best.values, size
        base = self.baseline.values if self.baseline is not None else None
        hv = self.front.hypervolume(base)
        return (None if hv is None else -hv), None, size

    def progress(self) -> Progress:
        failures, infeasible = self.failures()
        score, best, front = self.score()
        elapsed = self.elapsed()
        eta = None
        if self.session_evals and self.budget is not None:
            eta = elapsed / self.session_evals * max(0, self.budget - self.asked)
        if self.search_plan.time_s is not None:
            left = max(0.0, self.search_plan.time_s - elapsed)
            eta = left if eta is None else min(eta, left)
        return Progress(
            generation=self.generation,
            evaluations=len(self.trials),
            budget=self.budget,
            elapsed_s=elapsed,
            time_budget_s=self.search_plan.time_s,
            eta_s=eta,
            failures=failures,
            infeasible=infeasible,
            cached=self.cached,
            fillers=self.fillers,
            reused=self.reused_asked,
            best=best,
            hypervolume=-score
            if score is not None and len(self.objective.directions) > 1
            else None,
            front_size=front,
        )

    def improved(self) -> bool:
        score, _, _ = self.score()
        if score is None:
            return False
        if self.best_score is None or score < self.best_score - IMPROVEMENT_EPS * max(
            1.0, abs(self.best_score)
        ):
            self.best_score = score
            return True
        return False

    def check_first_failures(self) -> None:
        n = self.opts.first_failures
        if self.first_checked or n <= 0:
            return
        # restriction-invalid candidates were never compiled: they say nothing of the toolchain
        searched = [
            t for t in self.trials if t is not self.baseline and t.outcome is not Outcome.INVALID
        ]
        if len(searched) < n:
            return
        self.first_checked = True
        if all(t.outcome.is_build_failure for t in searched[:n]):
            first = searched[0]
            tail = first.build.log_tail if first.build is not None else ""
            raise UserError(
                f"the first {n} candidates all failed to compile ({first.outcome.value}); "
                f"first error: {first_error_line(tail)}"
            )

    @property
    def asked(self) -> int:
        """Trials the budget counts: GPU measurements, so neither fillers (they only use
        idle GPU time) nor candidates answered by an identical binary."""
        return len(self.trials) - self.fillers - self.reused_asked

    @property
    def compiles_left(self) -> int | None:
        """Candidates the compile cap still allows (None: no budget, no cap)."""
        if self.budget is None:
            return None
        return COMPILE_CAP_FACTOR * self.budget - (len(self.trials) - self.fillers)

    def out_of_time(self) -> bool:
        time_s = self.search_plan.time_s
        return time_s is not None and self.elapsed() >= time_s

    def stop_check(self) -> str:
        if self.stop_requested:
            return "interrupted"
        if self.budget is not None and self.asked >= self.budget:
            return "budget"
        left = self.compiles_left
        if left is not None and left <= 0:
            return "compile cap"
        plan = self.search_plan
        if plan.time_s is not None and self.elapsed() >= plan.time_s:
            return "time"
        if plan.patience is not None and self.stale_generations >= plan.patience:
            return "stagnation"
        return ""

    # --- the loop -----------------------------------------------------------------------------
    def evaluate_batch(self, new: Sequence[Candidate], generation: int) -> list[Trial]:
        """Compile ahead, measure each build when ready, fill while all compile.

        Returns the trials in journal order, fillers included; stops early on time.
        A measurer with several GPUs (``slots``) measures that many at once (``scale/``).
        """
        if getattr(self.measurer, "slots", 1) > 1 and self.objective.measures:
            from ctune.scale.batch import evaluate_concurrently

            return evaluate_concurrently(self, new, generation)
        futures: dict[int, Future[Build]] = {}
        shared: dict[BuildGroup, Future[Build]] = {}
        left = list(range(len(new)))  # not measured yet, in batch order
        pending = {c.key() for c in new}
        done: list[Trial] = []
        try:
            while left:
                if self.stop_requested:
                    break
                if done and self.out_of_time():
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
                start = self.clock()
                build = futures.pop(i).result()
                self.compile_wait_s += self.clock() - start
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
        """Keep ``jobs + 1`` distinct builds requested ahead of the measurer.

        A candidate whose build another one already requested (they differ only
        in runtime genes) gets that future: submitting it again would hold a
        compile slot while it waits for the same build.
        """
        requested = {id(futures[j]) for j in left if j in futures}
        for j in left:
            if len(requested) > self.jobs:
                return
            if j in futures:
                continue
            group = self.spec.space.build_group(new[j].genes)
            if group not in shared:
                shared[group] = self.compiler.submit(new[j], self.problem)
            futures[j] = shared[group]
            requested.add(id(futures[j]))

    def evaluate(
        self, cand: Candidate, build: Build, generation: int, filler: bool = False
    ) -> Trial:
        """Measure, score, journal and announce one candidate whose build is done; one
        whose binary this search measured already takes that measurement instead."""
        if build.candidate_key != cand.key():  # another candidate's build, shared
            build = dataclasses.replace(build, candidate_key=cand.key(), cache_hit=True)
        build = self.within_device(cand, build)
        source = self.binaries.source(self.binaries.identity(cand, build))
        if source is not None:
            trial = shared_trial(source, cand, build, len(self.trials), generation)
            self.record(trial, filler, same_as=source.candidate.key())
        else:
            measurement = self.measure(cand, build)
            trial = self.make_trial(cand, build, measurement, generation)
            self.record(trial, filler)
        self.session_evals += 1
        self.emit(TrialFinished(trial, self.progress(), filler))
        self.check_first_failures()
        return trial

    def pick_filler(self, pending: set[str]) -> Candidate | None:
        """A filler, if filling is on and the clock leaves room for one."""
        if not self.filling:
            return None
        if self.out_of_time():
            return None
        return self.filler.pick([t for _, t in self.front.members], self.cache, pending)

    def evaluate_filler(self, cand: Candidate, generation: int) -> Trial:
        start = self.clock()
        build = self.compiler.build(cand, self.problem)  # the parent's build: a cache hit
        self.compile_wait_s += self.clock() - start
        if not build.cache_hit:
            # the compiler built it anew: it passes runtime genes to nvcc, or lost its cache
            self.filling = False
            self.note(
                "filling stopped: a runtime-gene variant of a built candidate was compiled "
                "anew, so fillers are not cheap with this compiler"
            )
        return self.evaluate(cand, build, generation, filler=True)

    def loop(self) -> None:
        idle = 0
        while True:
            reason = self.stop_check()
            if reason:
                self.stop_reason = reason
                return
            remaining = MAX_BATCH if self.budget is None else self.budget - self.asked
            left = self.compiles_left
            remaining = remaining if left is None else min(remaining, left)
            asked = self.strategy.ask(min(MAX_BATCH, remaining))
            if not asked:
                self.stop_reason = "exhausted"
                return
            self.generation += 1
            told: list[Trial] = []
            new: list[Candidate] = []
            keys: set[str] = set()
            for cand in asked:
                key = cand.key()
                if key in self.cache:
                    told.append(self.cache[key])
                    self.cached += 1
                elif key not in keys:
                    keys.add(key)
                    new.append(cand)
            finished = self.evaluate_batch(new[:remaining], self.generation)
            told.extend(finished)
            fresh = [t for t in finished if t.candidate.key() in keys]  # fillers were not asked
            self.strategy.tell(told)
            assert self.journal is not None
            self.journal.append_state(self.generation, self.strategy.state())
            improved = self.improved()
            self.stale_generations = 0 if improved else self.stale_generations + 1
            self.emit(GenerationFinished(self.progress(), improved))
            if self.stop_requested:
                self.stop_reason = "interrupted"
                return
            idle = 0 if fresh else idle + 1
            if idle >= MAX_IDLE_GENERATIONS:
                self.stop_reason = "converged"
                return
            if len(fresh) < len(new[:remaining]):
                self.stop_reason = "time"
                return

    # --- confirmation and the result ----------------------------------------------------------
    def member(
        self, trial: Trial, build: Build | None, runs: Sequence[Measurement]
    ) -> MemberResult:
        from ctune.search.report import changed_genes, pool

        pooled = pool(runs) if runs else None
        values = trial.values or ()
        if pooled is not None:
            confirmed_values, _ = self.objective.evaluate(build, pooled, self.problem.dims)
            values = confirmed_values or values
        return MemberResult(
            candidate=trial.candidate,
            key=trial.candidate.key(),
            changed=changed_genes(trial.candidate, self.spec.space.default_values()),
            values=tuple(values),
            search_values=trial.values,
            confirmed=pooled is not None,
            build=build or trial.build,
            trial=trial,
            pooled=pooled,
            per_process=tuple(runs),
        )

    def confirm(self) -> tuple[MemberResult | None, list[MemberResult], list[tuple[str, str]]]:
        from ctune.search.report import (
            bootstrap,
            front_of,
            gain,
            pick_for_confirmation,
            significance,
        )

        directions = self.objective.directions
        chosen = self.to_confirm(pick_for_confirmation)
        assert self.baseline is not None
        processes = self.opts.confirm_processes
        can_confirm = (
            processes > 0
            and self.objective.measures
            and self.measurer is not None
            and hasattr(self.measurer, "remeasure")
        )
        dropped: list[tuple[str, str]] = []
        if not can_confirm:
            unconfirmed = self.member(self.baseline, None, ())
            return (
                unconfirmed,
                front_of([self.member(t, None, ()) for t in chosen], directions),
                dropped,
            )
        items: list[tuple[Trial, Build]] = []
        for trial in [self.baseline, *[t for t in chosen if t is not self.baseline]]:
            build = self.compiler.build(trial.candidate, self.problem)  # a cache hit
            if not build.outcome.is_ok:
                dropped.append((trial.candidate.key(), f"rebuild failed ({build.outcome.value})"))
                continue
            items.append((trial, build))
        self.emit(Confirming(sum(t is not self.baseline for t, _ in items), processes))
        runs = self.remeasure_in_proportion(items, processes)
        for per_key in runs.values():
            for run in per_key:
                self.check_device(run)
        members: list[MemberResult] = []
        base: MemberResult | None = None
        for trial, build in items:
            key = trial.candidate.key()
            if key not in runs and trial is not self.baseline:
                continue  # the decision did not need it (confirm.py)
            got = runs.get(key, [])
            bad = [m for m in got if not m.outcome.is_ok]
            if not got or bad:
                why = bad[0].outcome.value if bad else "not measured"
                dropped.append((key, f"confirmation failed ({why})"))
                if trial is self.baseline:
                    base = self.member(trial, build, ())
                continue
            m = self.member(trial, build, got)
            if trial is self.baseline:
                base = m
            _, violations = self.objective.evaluate(build, m.pooled, self.problem.dims)
            if any(v > 0 for v in violations):
                dropped.append((key, "violates a constraint when re-measured"))
                continue
            members.append(m)
        front = front_of(
            [m for m in members if m.key in {t.candidate.key() for t in chosen}], directions
        )
        if base is not None and base.per_process and base.pooled is not None:
            ctx = self.objective.context(self.problem.dims)
            first = self.objective.objectives[0]
            shared = bootstrap(first, base.build, base.per_process, ctx, self.search_plan.seed)
            out = []
            for m in front:
                sig = significance(m.per_process, base.per_process)
                g = (
                    gain(
                        first,
                        (m.build, m.per_process, m.pooled),
                        (base.build, base.per_process, base.pooled),
                        ctx,
                        seed=self.search_plan.seed,
                        baseline_replicates=shared,
                    )
                    if m.pooled is not None
                    else None
                )
                out.append(dataclasses.replace(m, significance=sig, gain=g))
            front = out
        return base, front, dropped

    def to_confirm(self, pick: Callable[..., list[Trial]]) -> list[Trial]:
        """The members to confirm, one per binary: among candidates that ran the same
        binary, the one that changes the fewest genes (a flag that changes nothing is not
        worth pinning)."""
        from ctune.search.report import changed_genes

        measured = [t for t in self.trials if t.candidate.key() not in self.binaries.same_as]
        defaults = self.spec.space.default_values()
        out: list[Trial] = []
        for trial in pick(measured, self.objective.directions, self.confirm_limit()):
            group = self.binaries.group_of(self.cache, trial.candidate.key())
            out.append(
                min(group, key=lambda t: (len(changed_genes(t.candidate, defaults)), t.number))
            )
        return out

    def remeasure_in_proportion(
        self, items: Sequence[tuple[Trial, Build]], processes: int
    ) -> dict[str, list[Measurement]]:
        """Fresh processes, one round at a time, until the decision is made (confirm.py)."""
        from ctune.search.confirm import confirm_in_proportion
        from ctune.search.report import pool

        assert self.measurer is not None and self.baseline is not None
        measurer = self.measurer
        first = self.objective.objectives[0]

        def run_round(batch: Sequence[tuple[Trial, Build]]) -> Mapping[str, Measurement]:
            got = measurer.remeasure(
                self.spec, [(t.candidate, b) for t, b in batch], self.problem, self.plan, 1
            )
            return {k: v[0] for k, v in got.items() if v}

        def value_of(build: Build, runs: Sequence[Measurement]) -> float | None:
            pooled = pool(runs)
            ctx = self.objective.context(self.problem.dims)
            got = None if pooled is None else first.value(build, pooled, ctx)
            return None if got is None else (-got if first.direction == "max" else got)

        start = self.clock()
        runs, cost = confirm_in_proportion(
            items,
            self.baseline.candidate.key(),
            run_round,
            value_of,
            directions=self.objective.directions,
            limit=processes,
            seed=self.search_plan.seed,
            clock=self.clock,
        )
        self.confirm_s += self.clock() - start
        self.confirmation = cost
        return runs

    def pinned(self, front: Sequence[MemberResult], feasibility: Feasibility | None) -> str | None:
        """The best front member on the first objective; none when the constraints left
        nothing better than the (infeasible) default build."""
        if not front or (feasibility is not None and feasibility.dominated):
            return None
        first = sign(self.objective.directions[0])
        return min(front, key=lambda m: first * m.values[0]).key

    def confirm_limit(self) -> int:
        """How many candidates the report considers: top few for one objective, else the front."""
        if len(self.objective.directions) == 1:
            return CONFIRM_TOP_SINGLE
        return self.opts.confirm_members

    def result(self, interrupted: bool) -> SearchResult:
        dropped: list[tuple[str, str]] = []
        if interrupted or self.baseline is None:
            from ctune.search.report import front_of, pick_for_confirmation

            base = self.member(self.baseline, None, ()) if self.baseline else None
            chosen = pick_for_confirmation(
                self.trials, self.objective.directions, self.confirm_limit()
            )
            front = front_of([self.member(t, None, ()) for t in chosen], self.objective.directions)
        else:
            base, front, dropped = self.confirm()
        failures, infeasible = self.failures()
        assert self.journal is not None
        feasibility = None
        if self.baseline is not None:
            from ctune.search.feasibility import analyze

            feasibility = analyze(
                self.trials, self.objective, self.problem.dims, self.baseline, front, base
            )
        return SearchResult(
            kernel=self.spec.name,
            problem=self.problem.name,
            objectives=tuple(
                {**o, "text": obj.text}
                for o, obj in zip(self.objective.infos(), self.objective.objectives, strict=True)
            ),
            constraints=tuple(c.text for c in self.objective.constraints),
            strategy=self.strategy_name,
            seed=self.search_plan.seed,
            journal=self.journal.path,
            evaluations=len(self.trials),
            budget=self.budget,
            generations=self.generation,
            stop_reason="interrupted" if interrupted else self.stop_reason,
            baseline=base,
            front=tuple(front),
            pinned=self.pinned(front, feasibility),
            timing=Timing(
                self.elapsed(),
                self.compile_wait_s,
                self.measure_s,
                self.confirm_s,
                self.compile_cpu_s,
            ),
            device=self.device or "unknown",
            failures=failures,
            infeasible=infeasible,
            cached=self.cached,
            fillers=self.fillers,
            dropped=tuple(dropped),
            notes=tuple(self.notes),
            confirm_processes=self.confirmation.processes if self.confirmation else 0,
            confirmation=self.confirmation,
            binaries=self.binaries.binaries,
            reused=self.reused_asked,
            plan=self.search_plan.to_json(),
            feasibility=feasibility,
        )


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
    for name, value in (("budget", opts.budget), ("patience", opts.patience)):
        if value is not None and value < 1:
            raise UserError(f"--{name} must be at least 1, got {value}")
    if opts.time_s is not None and opts.time_s <= 0:
        raise UserError(f"--time must be positive, got {opts.time_s:g} s")
    if opts.confirm_processes < 0:
        raise UserError("--confirm-processes must be 0 or more")
    if opts.fill is not None and not isinstance(opts.fill, bool):
        raise UserError(f"fill must be true or false, got {opts.fill!r}")
    if publish is not None:
        publish.check()
    if opts.resume is not None and not Path(opts.resume).is_file():
        raise UserError(f"{opts.resume}: no such journal to resume")
    n_objectives = len(objective.objectives)
    if opts.resume is not None:
        header = journal_mod.read_header(Path(opts.resume))
        plan, conflict = resume_plan(opts, header, n_objectives, Path(opts.resume))
    else:
        plan, conflict = new_plan(opts, n_objectives), None
    caps = capabilities
    if caps is None:
        caps = getattr(measurer, "capabilities", None)
    if caps is None and objective.needs:
        caps = probe_capabilities()
    check_needs(objective, set(caps or ()))

    owned: list[Any] = []
    try:
        if compiler is None:
            compiler = _default_compiler(settings, spec, toolchain)
            owned.append(compiler)
        if limits is None:
            probe = measurer is None and objective.measures
            limits = device_limits(settings.arch or spec.arch, probe=probe)
        # the strategy and its options are validated here, before a worker starts
        run = _Run(settings, spec, objective, opts, compiler, measurer, emit, clock, limits, plan)
        run.plan_conflict = conflict
        if measurer is None and objective.measures:
            run.measurer = _default_measurer(settings)
            owned.append(run.measurer)
        return _execute(run, opts, fingerprint, emit, publish)
    finally:
        for part in reversed(owned):
            close = getattr(part, "close", None)
            if callable(close):
                close()


@contextlib.contextmanager
def _graceful_interrupt(run: _Run) -> Iterator[None]:
    """The first SIGINT asks the run to stop after the candidate in flight; the second is a
    KeyboardInterrupt as usual. Only the main thread can own a signal handler: elsewhere
    (a search started from a worker thread) Ctrl-C keeps Python's default."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if run.stop_requested:
            raise KeyboardInterrupt
        run.stop_requested = True
        # only a flag and one raw line here: the live display may be mid-render
        os.write(2, b"\nctune: finishing the candidate in flight, then saving (again: stop now)\n")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _execute(
    run: _Run,
    opts: SearchOptions,
    fingerprint: Mapping[str, str] | None,
    emit: EventSink,
    publish: Publisher | None,
) -> SearchResult:
    interrupted = False
    try:
        if opts.resume is not None:
            run.open_resume(Path(opts.resume))
        else:
            run.open_new()
        assert run.journal is not None
        count, exact = run.space.count_valid(run.problem.dims)
        emit(
            SearchStarted(
                run.spec.name,
                run.problem.name,
                run.journal.path,
                len(run.trials) if opts.resume else 0,
                run.strategy_name,
                run.objective.describe(),
                run.budget,
                run.search_plan.time_s,
                count,
                exact,
                run.jobs,
                tuple(o.text for o in run.objective.objectives),
            )
        )
        if run.baseline is not None:
            emit(BaselineMeasured(run.baseline))
        run.note_device_limits(count)
        run.improved()
        try:
            with _graceful_interrupt(run):
                run.warm_start()
                run.loop()
            interrupted = run.stop_reason == "interrupted"
            if interrupted:
                run.note(
                    "interrupted: the candidate in flight finished and was saved; "
                    f"resume with --resume {run.journal.path}",
                    "info",
                )
        except KeyboardInterrupt:
            interrupted = True
            run.note(
                "interrupted: the candidate in flight was abandoned; "
                f"resume with --resume {run.journal.path}",
                "info",
            )
        result = run.result(interrupted)
        if not interrupted and result.baseline is not None:
            result = dataclasses.replace(result, record=_record(run, result, fingerprint))
            if publish is not None:
                result = publish(run.spec, run.objective, result)
        emit(SearchFinished(result))
        return result
    finally:
        if run.journal is not None:
            run.journal.close()


def _record(run: _Run, result: SearchResult, fingerprint: Mapping[str, str] | None) -> ResultRecord:
    """Where the numbers come from and how the search ran, for the artifact."""
    from ctune.measure.protocol import record as protocol_record

    fp = (
        dict(fingerprint)
        if fingerprint is not None
        else _fingerprint(run.spec, run.problem.name, run.settings, run.compiler, run.measurer)
    )
    assert run.journal is not None
    provenance = {
        "strategy": run.strategy_name,
        "seed": run.search_plan.seed,
        "evaluations": result.evaluations,
        "budget": run.budget,
        "journal_sha256": run.journal.sha256(),
        "created_utc": journal_mod.utc_stamp(),
        "wall_s": round(result.timing.wall_s, 3),
    }
    return ResultRecord(
        fp, provenance, protocol_record(run.plan), _inputs(run), dict(run.strategy.options)
    )


def _inputs(run: _Run) -> dict[str, Any]:
    """The source closure file by file, for a real build (stand-ins have no sources to list)."""
    if getattr(run.compiler, "fingerprint_fields", None) is not None:
        return {}
    from ctune.compile.deps import source_closure

    return {"closure": source_closure(run.spec, run.settings.nvcc)}


def _default_compiler(settings: Settings, spec: KernelSpec, toolchain: Toolchain | None) -> Any:
    from ctune.compile.toolchain import probe_toolchain
    from ctune.scale import compiler_for

    return compiler_for(spec, toolchain or probe_toolchain(settings.nvcc), settings)


def _default_measurer(settings: Settings) -> Any:
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
    "gpu_available",
    "probe_capabilities",
    "run_search",
]
