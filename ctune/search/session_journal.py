"""How a search session starts, and what it writes: new, resumed or warm-started.

A new search compiles and measures the default build (the baseline) before anything
is written: a baseline that does not compile or run is the user's error, and leaves
no journal behind. A resumed one replays its journal's trials into the trial book and
the strategy (same counts, same strategy state), refuses a journal of another kernel,
space, objective or device, and goes on. A warm start measures given configurations
first. Every trial is appended to the journal (fsync'd) before it is accounted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.compile.logs import first_error_line
from ctune.errors import UserError
from ctune.interrupts import NOTHING_WRITTEN
from ctune.records import Measurement, Trial
from ctune.search import journal as journal_mod
from ctune.search.journal_records import FIX, JournalRecordError
from ctune.search.result import COMPILE_ONLY

if TYPE_CHECKING:
    from ctune.objective.spec import ObjectiveSpec
    from ctune.search.driver import _Run
    from ctune.spec import KernelSpec


def device_label(measurement: Measurement | None) -> str | None:
    """The journal's device identity: model and SM, not the driver (which may update)."""
    from ctune.evidence.identity import gpu_label

    if measurement is None or measurement.device is None:
        return None
    return gpu_label(measurement.device)


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


def kept_line(path: Path, trials: int, rounds: int = 0) -> str:
    """What an interrupted search kept, for the line it ends with."""
    confirmed = f" and {rounds} confirmation round(s)" if rounds else ""
    return f"journal {path} keeps {trials} trial(s){confirmed}; continue with --resume {path}"


class SessionJournal:
    """The journal of one search session and the device it measures on."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.journal: journal_mod.Journal | None = None
        self.header: dict[str, Any] = {}
        self.device: str | None = None
        self.device_checked = True
        #: the resumed journal's confirmation rounds; those of the confirmation of the
        #: same trials are taken back (chosen when it starts) instead of measured again
        self.resumed_rounds: list[journal_mod.ConfirmationRound] = []
        self._replayable: list[journal_mod.ConfirmationRound] | None = None
        self.rounds = 0  # this confirmation's rounds in the journal: taken back or written

    def identity(self) -> dict[str, Any]:
        """What a resumed journal must match: the request's identity, the build, the device."""
        run = self.run
        out = request_identity(run.spec, run.problem.name, run.objective, self.device)
        out["fingerprint"] = run.build_fingerprint()
        return out

    def kept(self) -> str:
        """What an interrupt now keeps: the journal and what is in it, or nothing."""
        if self.journal is None:
            return NOTHING_WRITTEN
        rounds = self.rounds if self._replayable is not None else len(self._same_trials())
        return kept_line(self.journal.path, len(self.run.book.trials), rounds)

    # --- confirmation rounds ---------------------------------------------------------------
    def _same_trials(self) -> list[journal_mod.ConfirmationRound]:
        """The resumed journal's last confirmation of the trials the book now holds."""
        trials = len(self.run.book.trials)
        mine = [r for r in self.resumed_rounds if r.trials == trials]
        starts = [i for i, r in enumerate(mine) if r.round == 1]
        return mine[starts[-1] :] if starts else []

    def take_round(self, keys: set[str]) -> dict[str, Measurement] | None:
        """The next journaled round of this confirmation when it measured exactly ``keys``
        (what this round is about to measure), else None: from the first round that
        differs, every later one is measured afresh."""
        if self._replayable is None:
            self._replayable = self._same_trials()
        if not self._replayable:
            return None
        first = self._replayable.pop(0)
        if set(first.runs) != keys:
            self._replayable = []
            return None
        self.rounds += 1
        return dict(first.runs)

    def record_round(self, runs: Mapping[str, Measurement]) -> None:
        """Journal one confirmation round (fsync'd) as soon as it is measured."""
        assert self.journal is not None
        if self._replayable is None:
            self._replayable = []
        self.rounds += 1
        self.journal.append_round(len(self.run.book.trials), self.rounds, runs)

    # --- writing ----------------------------------------------------------------------------
    def check_device(self, measurement: Measurement | None) -> None:
        """On resume, the first measurement proves the GPU is the journal's (else refuse)."""
        if self.device_checked or measurement is None or self.journal is None:
            return
        label = device_label(measurement)
        if label is not None:
            journal_mod.check_identity(self.journal.path, self.header, {"device": label})
            self.device_checked = True

    def record(self, trial: Trial, filler: bool = False, same_as: str | None = None) -> None:
        """Journal a finished trial, then account it."""
        assert self.journal is not None
        run = self.run
        self.check_device(trial.measurement)
        elapsed = run.timers.search_elapsed()
        self.journal.append(trial, filler=filler, elapsed_s=elapsed, same_binary_as=same_as)
        run.book.add(trial, same_as, filler)
        if trial.build is not None and not trial.build.cache_hit:
            run.timers.compile_cpu_s += trial.build.compile_s

    # --- the baseline -----------------------------------------------------------------------
    def baseline_trial(self) -> Trial:
        """Compile and measure the default build; any failure is the user's, before writing."""
        run = self.run
        spec, pipeline = run.spec, run.pipeline
        cand = spec.default_candidate()
        broken = run.space.violations(cand.as_dict(), run.problem.dims)
        if broken:
            raise UserError(
                f"{spec.yaml_path.name}: the default build breaks a device limit "
                f"({run.limits.source}): '{broken[0]}'; change the genes' defaults"
            )
        start = run.clock()
        build = run.compiler.build(cand, run.problem)
        run.timers.compile_wait_s += run.clock() - start
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
        if run.objective.measures:
            # the first measurement waits for its worker (and the confirmation's spares):
            # the compiler goes on with the builds the strategy will ask for meanwhile
            pipeline.queue_ahead(left=1)
        measurement = pipeline.measure(cand, build, pipeline.baseline_plan())
        if measurement is not None and not measurement.outcome.is_ok:
            raise UserError(
                f"{spec.source_path.name}: the default build (baseline) fails on "
                f"{run.problem.name} ({measurement.outcome.value}): "
                f"{(measurement.error or 'no detail')[:300]}"
            )
        trial = pipeline.make_trial(cand, build, measurement, 0)
        if trial.values is None:
            raise UserError(
                f"the objectives ({run.objective.describe()}) cannot be computed for the "
                "default build: the measurer returned no value for one of them"
            )
        return trial

    def settle_timing(self, baseline: Trial) -> None:
        """``auto`` becomes the method the baseline was timed with, for every later candidate:
        numbers compared within a search (and with its artifact) must mean the same thing."""
        run = self.run
        m = baseline.measurement
        if run.plan.timing == "auto" and m is not None and m.timing_method in ("events", "graph"):
            run.plan = dataclasses.replace(run.plan, timing=m.timing_method)

    def _record_baseline(self, trial: Trial) -> None:
        self.record(trial)
        self.run.book.baseline = trial
        self.run.strategy.tell([trial])

    # --- opening ----------------------------------------------------------------------------
    def open_new(self) -> None:
        """Measure the baseline, then create the journal with it as the first trial."""
        run = self.run
        trial = self.baseline_trial()
        self.settle_timing(trial)
        self.device = device_label(trial.measurement) or (
            COMPILE_ONLY if not run.objective.measures else "unknown"
        )
        path = run.opts.journal or journal_mod.default_path(
            run.settings.cache_dir, run.spec.name, run.problem.name
        )
        self.header = {
            **self.identity(),
            "info": {
                "strategy": run.strategy_name,
                "seed": run.search_plan.seed,
                "created_utc": journal_mod.utc_stamp(),
                "budget": run.budget.limit,
            },
            "search": run.search_plan.to_json(),
        }
        self.journal = journal_mod.Journal.create(path, self.header, run.opts.journal_fsync)
        self._record_baseline(trial)

    def open_resume(self, path: Path) -> None:
        """Reopen ``path``, check it is this search's, and replay its trials."""
        run = self.run
        journal, replay = journal_mod.Journal.resume(path, run.opts.journal_fsync)
        self.journal = journal
        self.header = replay.header
        run.timers.resumed_s = replay.last_elapsed_s
        self.device = run.measurer.device_name if run.measurer is not None else None
        for change in journal_mod.check_identity(path, replay.header, self.identity()):
            run.note(change, "info")
        if self.device is None:
            self.device = str(replay.header.get("device", "unknown"))
            self.device_checked = not run.objective.measures
        if replay.dropped_tail:
            run.note(f"{path}: dropped a torn last line (the previous run stopped mid-write)")
        self._replay(replay, path)
        self.resumed_rounds = list(replay.rounds)
        if run.book.baseline is None:
            self._record_baseline(self.baseline_trial())
        assert run.book.baseline is not None
        self.settle_timing(run.book.baseline)
        run.book.check_first_failures(run.opts.first_failures)

    def _check_genes(self, trial: Trial, where: str) -> None:
        """A journaled candidate is of this kernel and names every gene of the space, each
        with one of its values: nothing else reaches the compiler or the strategy."""
        spec = self.run.spec
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
        """The journal's trials into the book and the strategy, as when they were run."""
        run = self.run
        book = run.book
        default_key = run.spec.default_candidate().key()
        for trial, line in zip(replay.trials, replay.lines, strict=True):
            self._check_genes(trial, journal_mod.where(path, line))
            trial = dataclasses.replace(trial, number=len(book.trials))
            key = trial.candidate.key()
            book.add(trial, replay.same_binary.get(key), key in replay.fillers)
            if key == default_key and book.baseline is None:
                book.baseline = trial
        for group in journal_mod.trials_by_generation(book.trials):
            run.strategy.tell(group)
        if replay.states:
            run.strategy.load_state(replay.states[-1][1])
        run.generation = max((t.generation for t in book.trials), default=0)

    def warm_start(self) -> None:
        """Measure the given configurations first, as one generation told to the strategy.

        They enter its selection pool like its own trials (a GA breeds from the best of
        them), count against the budget, and take at most ``warm_start_share`` of it (a
        quarter unless a problem set says more): the search still explores. The note
        accounts for every configuration: measured, not valid here, already tried, the
        same candidate as an earlier one, or over that share.
        """
        run = self.run
        given = run.opts.warm_start
        if not given:
            return
        from ctune.exchange.t4 import candidates

        mapped = candidates(run.spec.name, run.space, given, run.problem.dims)
        fresh = [c for c in mapped.candidates if c.key() not in run.book.cache]
        limit = max(0, run.budget.warm_start_share(run.opts.warm_start_share))
        chosen = fresh[:limit]
        if chosen:
            run.generation += 1
            finished = run.pipeline.evaluate_batch(chosen, run.generation)
            run.strategy.tell(finished)
            assert self.journal is not None
            self.journal.append_state(run.generation, run.strategy.state())
        where = f" from {run.opts.warm_start_source}" if run.opts.warm_start_source else ""
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
        run.note(text, "info")


__all__ = ["SessionJournal", "device_label", "kept_line", "request_identity"]
