"""The driver's confirm stage: what a finished search reports, re-measured first.

Run-to-run noise dominates within-run noise, so the members a search would pin are
re-measured in fresh processes before they are reported (the rule of how many
processes and when to stop is ``confirm.py``'s). This stage chooses those members (one
per binary, the top few for one objective, the front for several), rebuilds them (a
cache hit), drops what fails or breaks a constraint when re-measured, and reports each
member's significance and gain against the re-measured baseline. Where the spec names a
vendor call (cuBLAS, SDPA), it is measured in every round, in a fresh process of its own,
and the pinned member is compared with it (``measure/vendor.py``); it never decides a round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from ctune.objective.pareto import sign
from ctune.records import Build, Candidate, Measurement, Trial
from ctune.search.events import Confirming
from ctune.search.result import ControlsVerdict, MemberResult, VendorVerdict

if TYPE_CHECKING:
    from ctune.measure import Measurer
    from ctune.objective.spec import ObjectiveSpec
    from ctune.search.confirm import ConfirmationCost
    from ctune.search.feasibility import Feasibility
    from ctune.search.journal_writer import JournalWriter
    from ctune.search.run_state import Notices, RunInputs, RunStatus
    from ctune.search.timers import Timers
    from ctune.search.trial_book import TrialBook

#: single objective: how many of the best are confirmed (a lucky measurement cannot win alone)
CONFIRM_TOP_SINGLE = 3

#: (the baseline, the front, (candidate key, why dropped) of members left out)
Confirmed = tuple[MemberResult | None, list[MemberResult], list[tuple[str, str]]]


def can_confirm(processes: int, objective: ObjectiveSpec, measurer: Measurer | None) -> bool:
    """Will a search with ``--confirm-processes processes`` re-measure what it reports?"""
    return processes > 0 and objective.measures and measurer is not None


def sure_rounds(processes: int, objective: ObjectiveSpec, measurer: Measurer | None) -> int:
    """Fresh processes confirmation will surely use (0 when it will not run): known before
    the search starts, so that they can start beside its worker."""
    from ctune.search.confirm import min_processes

    if not can_confirm(processes, objective, measurer):
        return 0
    return min(min_processes(), processes)


class ConfirmStage:
    """Confirmation of one search's front (and baseline) against fresh processes."""

    def __init__(
        self,
        inputs: RunInputs,
        book: TrialBook,
        status: RunStatus,
        timers: Timers,
        notices: Notices,
        writer: JournalWriter,
    ) -> None:
        self.inputs = inputs
        self.book = book
        self.status = status  # the run's sampling plan; a Ctrl-C stops between rounds
        self.timers = timers
        self.notices = notices
        self.writer = writer  # each round is journaled as it ends
        self.cost: ConfirmationCost | None = None
        self.controls: ControlsVerdict | None = None  # set when a controls file was judged
        self.vendor_runs: list[Measurement] = []  # the vendor call, one per round

    def limit(self) -> int:
        """How many candidates the report considers: top few for one objective, else the front."""
        if len(self.inputs.objective.directions) == 1:
            return CONFIRM_TOP_SINGLE
        return self.inputs.opts.confirm_members

    def member(
        self, trial: Trial, build: Build | None, runs: Sequence[Measurement]
    ) -> MemberResult:
        """A reported member: its confirmed values when ``runs`` has any, else the search's."""
        from ctune.search.report import changed_genes, pool

        inputs = self.inputs
        pooled = pool(runs) if runs else None
        values = trial.values or ()
        if pooled is not None:
            confirmed_values, _ = inputs.objective.evaluate(build, pooled, inputs.problem.dims)
            values = confirmed_values or values
        return MemberResult(
            candidate=trial.candidate,
            key=trial.candidate.key(),
            changed=changed_genes(trial.candidate, inputs.spec.space.default_values()),
            values=tuple(values),
            search_values=trial.values,
            confirmed=pooled is not None,
            build=build or trial.build,
            trial=trial,
            pooled=pooled,
            per_process=tuple(runs),
        )

    def unconfirmed(self) -> tuple[MemberResult | None, list[MemberResult]]:
        """The baseline and front as the search measured them (interrupted, or no baseline)."""
        from ctune.search.report import front_of, pick_for_confirmation

        inputs = self.inputs
        baseline = self.book.baseline
        base = self.member(baseline, None, ()) if baseline else None
        chosen = pick_for_confirmation(self.book.trials, inputs.objective.directions, self.limit())
        front = front_of([self.member(t, None, ()) for t in chosen], inputs.objective.directions)
        return base, front

    def to_confirm(self, pick: Callable[..., list[Trial]]) -> list[Trial]:
        """The members to confirm, one per binary: among candidates that ran the same
        binary, the one that changes the fewest genes (a flag that changes nothing is not
        worth pinning)."""
        from ctune.search.report import changed_genes

        book = self.book
        measured = [t for t in book.trials if t.candidate.key() not in book.binaries.same_as]
        defaults = self.inputs.spec.space.default_values()
        out: list[Trial] = []
        for trial in pick(measured, self.inputs.objective.directions, self.limit()):
            group = book.binaries.group_of(book.cache, trial.candidate.key())
            out.append(
                min(group, key=lambda t: (len(changed_genes(t.candidate, defaults)), t.number))
            )
        return out

    def sure_rounds(self) -> int:
        """Fresh processes confirmation will surely use (0 when it will not run)."""
        inputs = self.inputs
        return sure_rounds(inputs.opts.confirm_processes, inputs.objective, inputs.measurer)

    def can_confirm(self) -> bool:
        inputs = self.inputs
        return can_confirm(inputs.opts.confirm_processes, inputs.objective, inputs.measurer)

    def interrupted(self) -> bool:
        """Did a Ctrl-C stop the confirmation before it decided (its rounds are journaled)?"""
        return self.cost is not None and self.cost.stopped == "interrupted"

    def confirm(self) -> Confirmed:
        """Re-measure the baseline and the chosen members; the reported baseline and front.
        Every round is journaled as it ends (and a resumed search takes it back)."""
        from ctune.search.report import front_of, pick_for_confirmation

        inputs = self.inputs
        directions = inputs.objective.directions
        chosen = self.to_confirm(pick_for_confirmation)
        pair = self.controls_pair(chosen)
        chosen += [t for t in pair if t not in chosen]
        baseline = self.book.baseline
        assert baseline is not None
        if not self.can_confirm():
            unconfirmed = self.member(baseline, None, ())
            return unconfirmed, front_of([self.member(t, None, ()) for t in chosen], directions), []
        dropped: list[tuple[str, str]] = []
        items = self.rebuilt([baseline, *[t for t in chosen if t is not baseline]], dropped)
        processes = inputs.opts.confirm_processes
        self.notices.emit(Confirming(sum(t is not baseline for t, _ in items), processes))
        runs = self.remeasure_in_proportion(items, processes, [t.candidate.key() for t in pair])
        for per_key in runs.values():
            for measurement in per_key:
                self.writer.check_device(measurement)
        base, members = self.confirmed_members(items, runs, dropped)
        keys = {t.candidate.key() for t in chosen}
        front = front_of([m for m in members if m.key in keys], directions)
        front = self.controls_if_significant(front, members)
        if base is not None and base.per_process and base.pooled is not None:
            front = self.against_baseline(base, front)
            front = self.default_if_best(base, front)
        return base, front, dropped

    def controls_pair(self, chosen: Sequence[Trial]) -> list[Trial]:
        """One objective, a search that measured controls files: the best trial with a file
        and the best without one are both confirmed (whichever of them is not among
        ``chosen`` joins it), in every round, so that the file is judged against the build
        it was tuned on in the same processes (:meth:`judge_controls`)."""
        inputs = self.inputs
        if len(inputs.objective.directions) != 1:
            return []
        from ctune.search.report import pick_for_confirmation

        directions = inputs.objective.directions
        tried = [t for t in self.book.trials if _has_controls(t)]
        if not tried:
            return []
        plain = [t for t in self.book.trials if not _has_controls(t)]
        keys = {t.candidate.key() for t in chosen}
        pair = pick_for_confirmation(tried, directions, 1) + pick_for_confirmation(
            plain, directions, 1
        )
        return [t for t in pair if t.candidate.key() not in keys] + [
            t for t in pair if t.candidate.key() in keys
        ]

    def judge_controls(self, members: Sequence[MemberResult]) -> ControlsVerdict | None:
        """The best confirmed member with a controls file against the best without one, by
        the gate's rule (None when either was not confirmed)."""
        from ctune.evidence.compare import Difference
        from ctune.search.confirm import significance

        inputs = self.inputs
        if len(inputs.objective.directions) != 1:
            return None
        tuned = [m for m in members if _has_controls(m.trial) and m.per_process]
        plain = [m for m in members if not _has_controls(m.trial) and m.per_process]
        if not tuned or not plain:
            return None
        best, reference = self.best(tuned), self.best(plain)
        verdict = significance(best.per_process, reference.per_process)
        first = sign(inputs.objective.directions[0])
        ratio = reference.values[0] / best.values[0] if best.values[0] else float("nan")
        return ControlsVerdict(
            best.key,
            reference.key,
            ratio if first > 0 else 1.0 / ratio,
            verdict.difference.value,
            verdict.reason,
            verdict.difference is Difference.LOWER,
        )

    def controls_if_significant(
        self, front: Sequence[MemberResult], members: Sequence[MemberResult]
    ) -> list[MemberResult]:
        """One objective: a best member with a controls file stays only when the file makes
        it faster, by the gate's rule, than the best confirmed member without one; else that
        member takes its place (a controls file is a toolchain requirement worth only a real
        gain). The verdict is kept for the report either way."""
        self.controls = self.judge_controls(members)
        if not front or self.controls is None:
            return list(front)
        best = self.best(front)
        if not _has_controls(best.trial) or self.controls.pinned:
            return list(front)
        reference = next(m for m in members if m.key == self.controls.reference)
        self.notices.note(
            f"controls file of {best.key} not pinned: {self.controls.reason} against "
            f"{reference.key}, the best build without one",
            "info",
        )
        return [reference]

    def default_if_best(
        self, base: MemberResult, front: Sequence[MemberResult]
    ) -> list[MemberResult]:
        """One objective: the default build joins the front (first) when, re-measured, it is
        at least as good as every member and meets the constraints, so that a search never
        pins a build its own confirmation measured slower than the default. (Seen on H200
        prefill GEMMs: a runtime-gene variant that led the search by noise was pinned at
        +5% p99 over the default.)"""
        inputs = self.inputs
        members = list(front)
        if len(inputs.objective.directions) != 1 or not members or base.pooled is None:
            return members
        if any(m.key == base.key for m in members):
            return members  # the default is a member already
        _, violations = inputs.objective.evaluate(base.build, base.pooled, inputs.problem.dims)
        if any(v > 0 for v in violations):
            return members
        first = sign(inputs.objective.directions[0])
        if first * base.values[0] <= first * self.best(members).values[0]:
            return [base, *members]
        return members

    def best(self, front: Sequence[MemberResult]) -> MemberResult:
        """The member best on the first objective (the first of equals)."""
        first = sign(self.inputs.objective.directions[0])
        return min(front, key=lambda m: first * m.values[0])

    def rebuilt(
        self, trials: Sequence[Trial], dropped: list[tuple[str, str]]
    ) -> list[tuple[Trial, Build]]:
        """Each trial with its build (a cache hit); one that no longer builds is dropped."""
        inputs = self.inputs
        items: list[tuple[Trial, Build]] = []
        for trial in trials:
            build = inputs.compiler.build(trial.candidate, inputs.problem)  # a cache hit
            if not build.outcome.is_ok:
                dropped.append((trial.candidate.key(), f"rebuild failed ({build.outcome.value})"))
                continue
            items.append((trial, build))
        return items

    def confirmed_members(
        self,
        items: Sequence[tuple[Trial, Build]],
        runs: Mapping[str, list[Measurement]],
        dropped: list[tuple[str, str]],
    ) -> tuple[MemberResult | None, list[MemberResult]]:
        """The re-measured baseline and members; failures and constraint breakers dropped."""
        inputs = self.inputs
        baseline = self.book.baseline
        members: list[MemberResult] = []
        base: MemberResult | None = None
        for trial, build in items:
            key = trial.candidate.key()
            if key not in runs and trial is not baseline:
                continue  # the decision did not need it (confirm.py)
            got = runs.get(key, [])
            bad = [m for m in got if not m.outcome.is_ok]
            if not got or bad:
                why = bad[0].outcome.value if bad else "not measured"
                dropped.append((key, f"confirmation failed ({why})"))
                if trial is baseline:
                    base = self.member(trial, build, ())
                continue
            m = self.member(trial, build, got)
            if trial is baseline:
                base = m
            _, violations = inputs.objective.evaluate(build, m.pooled, inputs.problem.dims)
            if any(v > 0 for v in violations):
                dropped.append((key, "violates a constraint when re-measured"))
                continue
            members.append(m)
        return base, members

    def against_baseline(
        self, base: MemberResult, front: Sequence[MemberResult]
    ) -> list[MemberResult]:
        """Each front member with its significance and gain over the re-measured baseline."""
        from ctune.search.confirm import significance
        from ctune.search.report import bootstrap, gain

        inputs = self.inputs
        assert base.pooled is not None
        seed = inputs.search_plan.seed
        ctx = inputs.objective.context(inputs.problem.dims)
        first = inputs.objective.objectives[0]
        shared = bootstrap(first, base.build, base.per_process, ctx, seed)
        out = []
        for m in front:
            sig = significance(m.per_process, base.per_process)
            g = (
                gain(
                    first,
                    (m.build, m.per_process, m.pooled),
                    (base.build, base.per_process, base.pooled),
                    ctx,
                    seed=seed,
                    baseline_replicates=shared,
                )
                if m.pooled is not None
                else None
            )
            out.append(dataclasses.replace(m, significance=sig, gain=g))
        return out

    def remeasure_in_proportion(
        self,
        items: Sequence[tuple[Trial, Build]],
        processes: int,
        references: Sequence[str] = (),
    ) -> dict[str, list[Measurement]]:
        """Fresh processes, one round at a time, until the decision is made (confirm.py)."""
        from ctune.search.confirm import confirm_in_proportion
        from ctune.search.report import pool

        inputs = self.inputs
        assert inputs.measurer is not None and self.book.baseline is not None
        measurer = inputs.measurer
        first = inputs.objective.objectives[0]

        vendor = self.vendor

        def run_round(batch: Sequence[tuple[Trial, Build]]) -> Mapping[str, Measurement]:
            """One fresh process, journaled as soon as it is measured; a resumed search
            takes the round back from its journal when it measured the same members. The
            vendor call gets a fresh process of its own in the round, before the members'
            on every other round, and its run is kept apart from theirs."""
            keys = {t.candidate.key() for t, _ in batch} | ({vendor[0].key()} if vendor else set())
            runs = self.writer.take_round(keys)
            if runs is None:
                vendor_first = len(self.vendor_runs) % 2 == 1
                runs = self.vendor_round(vendor) if vendor is not None and vendor_first else {}
                got = measurer.remeasure(
                    inputs.spec,
                    [(t.candidate, b) for t, b in batch],
                    inputs.problem,
                    self.status.sampling,
                    1,
                )
                runs |= {k: v[0] for k, v in got.items() if v}
                if vendor is not None and not vendor_first:
                    runs |= self.vendor_round(vendor)
                self.writer.record_round(runs)
            if vendor is None:
                return runs
            runs = dict(runs)
            taken = runs.pop(vendor[0].key(), None)
            if taken is not None:
                self.vendor_runs.append(taken)
            return runs

        def value_of(build: Build, runs: Sequence[Measurement]) -> float | None:
            pooled = pool(runs)
            ctx = inputs.objective.context(inputs.problem.dims)
            got = None if pooled is None else first.value(build, pooled, ctx)
            return None if got is None else (-got if first.direction == "max" else got)

        start = inputs.clock()
        # the rounds that surely run (and their vendor processes): started already
        measurer.prestart(self.sure_rounds() * (2 if vendor is not None else 1))
        runs, cost = confirm_in_proportion(
            items,
            self.book.baseline.candidate.key(),
            run_round,
            value_of,
            directions=inputs.objective.directions,
            limit=processes,
            seed=inputs.search_plan.seed,
            clock=inputs.clock,
            stop=lambda: self.status.stop_requested,
            references=references,
        )
        self.timers.confirm_s += inputs.clock() - start
        self.cost = cost
        return runs

    @cached_property
    def vendor(self) -> tuple[Candidate, Build] | None:
        """The spec's vendor call as a confirmation passenger (None: none, or not asked)."""
        inputs = self.inputs
        if inputs.spec.vendor_path is None or not inputs.opts.vendor:
            return None
        from ctune.measure.vendor import vendor_build, vendor_candidate

        return vendor_candidate(inputs.spec), vendor_build(inputs.spec)

    def vendor_round(self, vendor: tuple[Candidate, Build]) -> dict[str, Measurement]:
        """The vendor call once, in a fresh process of its own: what its library leaves in
        a process (PyTorch's, cuBLAS's state) never reaches a member's measurement."""
        inputs = self.inputs
        assert inputs.measurer is not None
        got = inputs.measurer.remeasure(
            inputs.spec, [vendor], inputs.problem, self.status.sampling, 1
        )
        return {k: v[0] for k, v in got.items() if v}

    def against_vendor(self, member: MemberResult | None) -> VendorVerdict | None:
        """The pinned ``member`` against the vendor call's runs of this confirmation, on
        the first objective, by the gate's rule (None: the vendor call was not measured)."""
        if member is None or not self.vendor_runs or not member.per_process:
            return None
        from ctune.search.confirm import significance
        from ctune.search.report import gain, pool

        inputs = self.inputs
        runs = self.vendor_runs
        verdict = VendorVerdict(inputs.spec.vendor_name, member.key, len(runs))
        failed = next((m for m in runs if not m.outcome.is_ok), None)
        pooled = pool(runs)
        if failed is not None or pooled is None or member.pooled is None:
            why = f"{failed.outcome.value}: {failed.error}" if failed else "no samples"
            return dataclasses.replace(verdict, error=why)
        first = inputs.objective.objectives[0]
        ctx = inputs.objective.context(inputs.problem.dims)
        vendor = self.vendor
        assert vendor is not None
        vendor_value = first.value(vendor[1], pooled, ctx)
        member_value = first.value(member.build, member.pooled, ctx)
        if vendor_value is None or member_value is None:
            return dataclasses.replace(verdict, error=f"{first.text} does not apply to it")
        sig = significance(member.per_process, runs)
        ratio = gain(
            first,
            (member.build, member.per_process, member.pooled),
            (vendor[1], runs, pooled),
            ctx,
            seed=inputs.search_plan.seed,
        )
        return dataclasses.replace(
            verdict,
            vendor_value=vendor_value,
            member_value=member_value,
            gain=ratio,
            difference=sig.difference.value,
            reason=sig.reason,
        )

    def pinned(self, front: Sequence[MemberResult], feasibility: Feasibility | None) -> str | None:
        """The best front member on the first objective; none when the constraints left
        nothing better than the (infeasible) default build."""
        if not front or (feasibility is not None and feasibility.dominated):
            return None
        return self.best(front).key


def _has_controls(trial: Trial | None) -> bool:
    """Does the trial's candidate apply a controls file (an acf gene that is not none)?"""
    if trial is None:
        return False
    from ctune.spec.space.nvcc import ACF_GENES, NO_CONTROLS

    return any(v != NO_CONTROLS for k, v in trial.candidate.genes if k in ACF_GENES)


__all__ = ["CONFIRM_TOP_SINGLE", "ConfirmStage", "can_confirm", "sure_rounds"]
