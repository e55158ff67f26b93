"""Every finished trial of one search, accounted once.

A trial is accounted the same way whether it was just measured or replayed from a
resumed journal: the cache that answers duplicates, the table of binaries (one
measurement per binary, ``dedup.py``), the counts the budget and the report read
(fillers, reused binaries, failures, infeasible) and the running front. Keeping this in
one place is what makes a resumed search count exactly as the uninterrupted one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from ctune.compile.logs import first_error_line
from ctune.errors import UserError
from ctune.records import Outcome, Trial
from ctune.search.dedup import BinaryTable
from ctune.search.front import FrontTracker, Score

if TYPE_CHECKING:
    from ctune.spec import KernelSpec, Problem


class TrialBook:
    """The trials (in number order, baseline first) and what is counted from them."""

    def __init__(
        self,
        spec: KernelSpec,
        problem: Problem,
        directions: tuple[str, ...],
        observe: Callable[[Trial], None],
    ) -> None:
        self.cache: dict[str, Trial] = {}
        self.trials: list[Trial] = []
        self.front = FrontTracker(directions)
        self.outcomes: Counter[str] = Counter()
        self.infeasible = 0
        self.baseline: Trial | None = None
        self.binaries = BinaryTable(spec, problem)  # one measurement per binary
        self.fillers = 0  # filler trials, resumed ones included
        self.reused_asked = 0  # asked trials answered by an identical binary (budget-free)
        self.cached = 0  # asked duplicates answered from the cache
        self.skipped = 0  # ruled out by the cost model before building (cost_policy.py)
        self._observe = observe  # the filler learns the parents it fills around
        self._first_checked = False

    def add(self, trial: Trial, same_as: str | None = None, filler: bool = False) -> None:
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
        elif trial.outcome is Outcome.SKIPPED:
            self.skipped += 1  # never built: not a failure (the cost policy's note says why)
        elif not trial.outcome.is_ok:
            self.outcomes[trial.outcome.value] += 1
        self.front.add(trial)
        self._observe(trial)
        self.fillers += filler
        self.reused_asked += same_as is not None and not filler

    @property
    def asked(self) -> int:
        """Trials the budget counts: GPU measurements, so neither fillers (they only use
        idle GPU time), candidates answered by an identical binary, nor candidates the
        cost model skipped (never built; the compile cap bounds how many are decided)."""
        return len(self.trials) - self.fillers - self.reused_asked - self.skipped

    def failures(self) -> tuple[dict[str, int], int]:
        return dict(self.outcomes), self.infeasible

    def score(self) -> Score:
        """The front's score, hypervolume normalised by the baseline's values."""
        base = self.baseline.values if self.baseline is not None else None
        return self.front.score(base)

    def check_first_failures(self, n: int) -> None:
        """The first ``n`` searched candidates all failing to compile is a broken kernel or
        toolchain, not a bad region of the space: stop with its first error."""
        if self._first_checked or n <= 0:
            return
        # restriction-invalid candidates were never compiled: they say nothing of the toolchain
        searched = [
            t for t in self.trials if t is not self.baseline and t.outcome is not Outcome.INVALID
        ]
        if len(searched) < n:
            return
        self._first_checked = True
        if all(t.outcome.is_build_failure for t in searched[:n]):
            first = searched[0]
            tail = first.build.log_tail if first.build is not None else ""
            raise UserError(
                f"the first {n} candidates all failed to compile ({first.outcome.value}); "
                f"first error: {first_error_line(tail)}"
            )


__all__ = ["TrialBook"]
