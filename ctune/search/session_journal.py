"""How a search session starts: new, resumed or warm-started.

A new search compiles and measures the default build (the baseline) before anything
is written: a baseline that does not compile or run is the user's error, and leaves
no journal behind. A resumed one replays its journal's finished generations into the
trial book and the strategy (same counts, same strategy state), holds back the trials of
a generation cut short until it is asked again, refuses a journal of another kernel,
space, objective or device, and goes on. A warm start measures given configurations
first. What is written, and when, is the journal writer's (``journal_writer.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.compile.logs import first_error_line
from ctune.errors import UserError
from ctune.records import Trial
from ctune.search import journal as journal_mod
from ctune.search.budget import MAX_BATCH
from ctune.search.cost_policy import Refill
from ctune.search.journal_records import FIX, JournalRecordError
from ctune.search.journal_writer import Journaled, complete, device_label
from ctune.search.result import COMPILE_ONLY

if TYPE_CHECKING:
    from ctune.exchange.t4 import Mapped
    from ctune.objective.spec import ObjectiveSpec
    from ctune.records import Candidate
    from ctune.search.cost_policy import CostPolicy
    from ctune.search.journal_writer import JournalWriter
    from ctune.search.pipeline import Pipeline
    from ctune.search.run_state import SearchRun
    from ctune.spec import KernelSpec, Problem
    from ctune.spec.space.limits import DeviceLimits


def request_identity(
    spec: KernelSpec, problem: str, objective: ObjectiveSpec, device: str | None = None
) -> dict[str, Any]:
    """What a resumed journal must match that needs no toolchain: kernel, problem, space,
    objectives, and the device where it is known. The driver checks a journal against it
    before it asks for a GPU, and before a flag the journal's search did not run with."""
    out: dict[str, Any] = {
        "kernel": spec.name,
        "problem": problem,
        "space": journal_mod.space_identity(spec.space),
        "objectives": objective.identity(),
    }
    if device is not None:
        out["device"] = device
    return out


def check_default_build(spec: KernelSpec, limits: DeviceLimits, problem: Problem) -> None:
    """Refuse a default build that breaks one of ``limits`` (a block over the threads per
    block): it cannot be the baseline. Checked against the target's table before a GPU is
    asked for (``SearchSession.open``), then against the GPU's own at the baseline."""
    space = limits.constrain(spec.space, spec.launch)
    broken = space.violations(spec.default_candidate().as_dict(), problem.dims)
    if broken:
        raise UserError(
            f"{spec.yaml_path.name}: the default build breaks a device limit "
            f"({limits.source}): '{broken[0]}'; change the genes' defaults"
        )


class SessionJournal:
    """The start of one search session: its baseline, its journal opened (new or resumed,
    through the writer) and its warm start (through the pipeline)."""

    def __init__(
        self, run: SearchRun, writer: JournalWriter, pipeline: Pipeline, costs: CostPolicy
    ) -> None:
        self.run = run
        self.writer = writer
        self.pipeline = pipeline
        self.costs = costs  # which of the first generation may compile beside the baseline

    def identity(self) -> dict[str, Any]:
        """What a resumed journal must match: the request's identity, the build, the device."""
        run = self.run
        out = request_identity(
            run.inputs.spec, run.inputs.problem.name, run.inputs.objective, self.writer.device
        )
        out["fingerprint"] = run.build_fingerprint()
        return out

    # --- the baseline -----------------------------------------------------------------------
    def baseline_trial(self) -> Trial:
        """Compile and measure the default build; any failure is the user's, before writing."""
        run = self.run
        spec, pipeline = run.inputs.spec, self.pipeline
        cand = spec.default_candidate()
        check_default_build(spec, run.inputs.limits, run.inputs.problem)
        start = run.inputs.clock()
        build = run.inputs.compiler.build(cand, run.inputs.problem)
        run.timers.compile_wait_s += run.inputs.clock() - start
        if not build.outcome.is_ok:
            raise UserError(
                f"{spec.source_path.name}: the default build (baseline) does not compile "
                f"({build.outcome.value}): {first_error_line(build.log_tail)}"
            )
        build = pipeline.within_device(cand, build)
        if not build.outcome.is_ok:
            raise UserError(
                f"{spec.source_path.name}: the default build cannot launch: "
                f"{build.log_tail}; change the genes' defaults"
            )
        if run.inputs.objective.measures:
            # the first measurement waits for its worker (and the confirmation's spares):
            # the compiler goes on with the builds the strategy will ask for meanwhile
            pipeline.queue_ahead(left=1)
        measurement = pipeline.measure(cand, build, pipeline.baseline_plan())
        if measurement is not None and not measurement.outcome.is_ok:
            raise UserError(
                f"{spec.source_path.name}: the default build (baseline) fails on "
                f"{run.inputs.problem.name} ({measurement.outcome.value}): "
                f"{(measurement.error or 'no detail')[:300]}"
            )
        trial = pipeline.make_trial(cand, build, measurement, 0)
        if trial.values is None:
            raise UserError(
                f"the objectives ({run.inputs.objective.describe()}) cannot be computed for the "
                "default build: the measurer returned no value for one of them"
            )
        return trial

    def settle_timing(self, baseline: Trial) -> None:
        """``auto`` becomes the method the baseline was timed with, for every later candidate:
        numbers compared within a search (and with its artifact) must mean the same thing."""
        run = self.run
        m = baseline.measurement
        if (
            run.status.sampling.timing == "auto"
            and m is not None
            and m.timing_method in ("events", "graph")
        ):
            run.status.sampling = dataclasses.replace(run.status.sampling, timing=m.timing_method)

    def _record_baseline(self, trial: Trial) -> None:
        self.writer.record(trial)
        self.run.book.baseline = trial
        self.run.strategy.tell([trial])

    # --- opening ----------------------------------------------------------------------------
    def open_new(self) -> None:
        """Measure the baseline, then create the journal with it as the first trial."""
        run = self.run
        self.prefetch_warm_start()
        self.prefetch_first_generation()
        trial = self.baseline_trial()
        self.settle_timing(trial)
        self.writer.device = device_label(trial.measurement) or (
            COMPILE_ONLY if not run.inputs.objective.measures else "unknown"
        )
        path = run.inputs.opts.journal or journal_mod.default_path(
            run.inputs.settings.cache_dir, run.inputs.spec.name, run.inputs.problem.name
        )
        self.writer.header = {
            **self.identity(),
            "info": {
                "strategy": run.inputs.strategy_name,
                "seed": run.inputs.search_plan.seed,
                "created_utc": journal_mod.utc_stamp(),
                "budget": run.budget.limit,
            },
            "search": run.inputs.search_plan.to_json(),
        }
        self.writer.journal = journal_mod.Journal.create(
            path, self.writer.header, run.inputs.opts.journal_fsync
        )
        self._record_baseline(trial)

    def open_resume(self, path: Path) -> None:
        """Reopen ``path``, check it is this search's, and replay its trials."""
        run = self.run
        journal, replay = journal_mod.Journal.resume(path, run.inputs.opts.journal_fsync)
        self.writer.journal = journal
        self.writer.header = replay.header
        run.timers.resumed_s = replay.last_elapsed_s
        self.writer.device = (
            run.inputs.measurer.device_name if run.inputs.measurer is not None else None
        )
        for change in journal_mod.check_identity(path, replay.header, self.identity()):
            run.notices.note(change, "info")
        if self.writer.device is None:
            self.writer.device = str(replay.header.get("device", "unknown"))
            self.writer.device_checked = not run.inputs.objective.measures
        if replay.dropped_tail:
            run.notices.note(
                f"{path}: dropped a torn last line (the previous run stopped mid-write)"
            )
        self._replay(replay, path)
        self.writer.resumed_rounds = list(replay.rounds)
        if run.book.baseline is None:
            self._record_baseline(self.baseline_trial())
        assert run.book.baseline is not None
        self.settle_timing(run.book.baseline)
        run.book.check_first_failures(run.inputs.opts.first_failures)

    def _check_genes(self, trial: Trial, where: str) -> None:
        """A journaled candidate is of this kernel and names every gene of the space, each
        with one of its values: nothing else reaches the compiler or the strategy."""
        spec = self.run.inputs.spec
        genes = trial.candidate.as_dict()
        if trial.candidate.kernel != spec.name:
            raise JournalRecordError(
                f"{where}: a candidate of kernel {trial.candidate.kernel[:40]!r}, not "
                f"{spec.name!r}; {FIX}"
            )
        try:
            spec.space.check_values(genes, where)
        except UserError as exc:
            raise JournalRecordError(f"{exc}; {FIX}") from None
        missing = [name for name in spec.space.names if name not in genes]
        if missing:
            raise JournalRecordError(f"{where}: gene {missing[0]} has no value; {FIX}")

    def _replay(self, replay: journal_mod.Replay, path: Path) -> None:
        """The journal's trials into the book and the strategy, as when they were run: those
        of the finished generations (up to the last generation record), told generation by
        generation, then the strategy's state after the last of them. The trials of a
        generation cut short are held back (``JournalWriter.held``): the search asks that
        generation again, and they answer it (docs/journal-format.md)."""
        run = self.run
        book = run.book
        default_key = run.inputs.spec.default_candidate().key()
        last = replay.states[-1][0] if replay.states else 0
        for trial, line in zip(replay.trials, replay.lines, strict=True):
            self._check_genes(trial, journal_mod.where(path, line))
            key = trial.candidate.key()
            same_as, filler = replay.same_binary.get(key), key in replay.fillers
            if trial.generation > last:
                self.writer.held[key] = Journaled(trial, filler, same_as)
                continue
            trial = dataclasses.replace(trial, number=len(book.trials))
            book.add(trial, same_as, filler)
            if key == default_key and book.baseline is None:
                book.baseline = trial
        for group in journal_mod.trials_by_generation(book.trials):
            run.strategy.tell(group)
        if replay.states:
            run.strategy.load_state(replay.states[-1][1])
        run.status.generation = last

    def _warm_candidates(
        self, tried: Collection[str]
    ) -> tuple[Mapped, list[Candidate], list[Candidate], int]:
        """The warm start's configurations as candidates of this space: (the mapping, those
        whose key is not in ``tried``, those of them to measure, the budget's share)."""
        from ctune.exchange.t4 import candidates

        run = self.run
        opts = run.inputs.opts
        mapped = candidates(
            run.inputs.spec.name, run.inputs.space, opts.warm_start, run.inputs.problem.dims
        )
        fresh = [c for c in mapped.candidates if c.key() not in tried]
        limit = max(0, run.budget.warm_start_share(opts.warm_start_share))
        return mapped, fresh, fresh[:limit], limit

    def prefetch_warm_start(self) -> None:
        """Start compiling the warm start's builds while the baseline compiles and is
        measured: they are measured right after it, and each would otherwise wait its whole
        compile (a CUTLASS front end: about a minute) once the baseline is done. The warm
        start's batch takes them as its own builds (``Pipeline.start_ahead``)."""
        run = self.run
        if not run.inputs.opts.warm_start or not run.inputs.objective.measures:
            return
        baseline = run.inputs.spec.default_candidate().key()  # built and measured first
        self.pipeline.start_ahead(self._warm_candidates({baseline})[2])

    def prefetch_first_generation(self) -> None:
        """Start compiling the strategy's first generation while the baseline compiles and
        is measured, where the strategy can name it now (``guess_first_asks``): it would
        otherwise start only once the baseline is done, leaving all compile slots but one
        idle for a whole build (a CUTLASS build: about a minute). Not with a warm start
        (measured first, told before the first ask; it has its own prefetch). With the cost
        model, only those its first screen will keep, and the refills it will ask for in
        place of the skipped ones (``CostPolicy.ahead``). A wrong guess costs builds on
        slots that were idle; they land in the cache."""
        run = self.run
        opts = run.inputs.opts
        if opts.warm_start or not run.inputs.objective.measures:
            return
        baseline = run.inputs.spec.default_candidate()
        asks = run.strategy.guess_first_asks(baseline)
        if asks is None:
            return
        # as the first generation will ask (Driver.generation_of), once the baseline has
        # taken its share of the budget and is in the cache
        seen = {baseline.key()}

        def ask_unseen(n: int) -> list[Candidate]:
            out = [c for c in asks(n) if c.key() not in seen]
            seen.update(c.key() for c in out)
            return out

        budget = run.budget
        first = ask_unseen(min(MAX_BATCH, budget.remaining() - 1))
        space = run.inputs.spec.space
        refill = Refill(
            ask_unseen,
            self.pipeline.jobs,
            lambda cand: space.build_group(cand.genes),
            budget.measurements_left() - 1,
            budget.decisions_left() - 1,
        )
        # the baseline compiles in this thread: leave it a slot
        self.pipeline.start_ahead(self.costs.ahead(first, refill)[: self.pipeline.jobs - 1])

    def warm_start(self) -> None:
        """Measure the given configurations first, as one generation told to the strategy.

        They enter its selection pool like its own trials (a GA breeds from the best of
        them), count against the budget, and take at most ``warm_start_share`` of it (a
        quarter unless a problem set says more): the search still explores. The note
        accounts for every configuration: measured, not valid here, already tried, the
        same candidate as an earlier one, or over that share. A resumed search whose
        journal finished a generation has had its warm start; one cut short in it is chosen
        again as it began, and its journaled trials answer (``Pipeline.evaluate_batch``).
        """
        run = self.run
        given = run.inputs.opts.warm_start
        if not given or run.status.generation > 0:
            return  # none, or a resumed journal's, finished: it is the first generation
        mapped, fresh, chosen, limit = self._warm_candidates(run.book.cache)
        if chosen:
            run.status.generation += 1
            trials = self.pipeline.evaluate_batch(chosen, run.status.generation)
            if complete([c.key() for c in chosen], trials):
                self.writer.end_generation(run.status.generation, run.strategy, trials)
        where = (
            f" from {run.inputs.opts.warm_start_source}"
            if run.inputs.opts.warm_start_source
            else ""
        )
        rest = [
            (mapped.invalid, "not valid here"),
            (len(mapped.candidates) - len(fresh), "already tried"),
            (mapped.repeated, "the same candidate as an earlier one"),
            (len(fresh) - len(chosen), f"over the warm start's limit of {limit}"),
        ]
        why = ", ".join(f"{n} {what}" for n, what in rest if n)
        text = f"warm start{where}: {len(chosen)} of {len(given)} configurations measured first"
        text += f" ({why})" if why else ""
        if mapped.partial:
            text += f"; {mapped.partial} name only some genes (the rest at their defaults)"
        run.notices.note(text, "info")


__all__ = ["SessionJournal", "request_identity"]
