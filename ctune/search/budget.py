"""When a search stops, and how much it may ask for next.

``budget`` counts GPU measurements (``TrialBook.asked``): fillers and candidates
answered by an identical binary are free. At most ``COMPILE_CAP_FACTOR`` x budget
candidates are compiled, so a space full of duplicate binaries still ends. ``time_s``
stops starting new candidates after that much wall time; ``patience`` stops after
that many generations without improving the score (best value, or hypervolume).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ctune.search.dedup import COMPILE_CAP_FACTOR
from ctune.search.options import WARM_START_SHARE  # with a budget, a warm start's share

if TYPE_CHECKING:
    from ctune.search.plan import SearchPlan
    from ctune.search.trial_book import TrialBook

#: the most candidates asked of the strategy at once
MAX_BATCH = 256
#: improvements smaller than this (relative) do not reset the patience counter
IMPROVEMENT_EPS = 1e-9
#: a warm start measures at most this many configurations without a budget
WARM_START_MAX = 16


class Budget:
    """The stop rules of one search: evaluations, compiles, time and patience."""

    def __init__(self, plan: SearchPlan, book: TrialBook, elapsed: Callable[[], float]) -> None:
        self.limit = plan.budget  # GPU measurements; None: no evaluation budget
        self.time_s = plan.time_s
        self.patience = plan.patience
        self.book = book
        self.elapsed = elapsed
        self.best_score: float | None = None
        self.stale_generations = 0

    @property
    def asked(self) -> int:
        return self.book.asked

    @property
    def compiles_left(self) -> int | None:
        """Candidates the compile cap still allows (None: no budget, no cap)."""
        if self.limit is None:
            return None
        return COMPILE_CAP_FACTOR * self.limit - (len(self.book.trials) - self.book.fillers)

    def out_of_time(self) -> bool:
        return self.time_s is not None and self.elapsed() >= self.time_s

    def stop_check(self, stop_requested: bool) -> str:
        """Why the search stops before the next generation ("" while it goes on)."""
        if stop_requested:
            return "interrupted"
        if self.limit is not None and self.asked >= self.limit:
            return "budget"
        left = self.compiles_left
        if left is not None and left <= 0:
            return "compile cap"
        if self.time_s is not None and self.elapsed() >= self.time_s:
            return "time"
        if self.patience is not None and self.stale_generations >= self.patience:
            return "stagnation"
        return ""

    def measurements_left(self) -> int:
        """GPU measurements the budget still allows (``MAX_BATCH`` without a budget)."""
        return MAX_BATCH if self.limit is None else self.limit - self.asked

    def decisions_left(self) -> int:
        """Candidates the compile cap still lets be decided, built or skipped."""
        left = self.compiles_left
        return MAX_BATCH if left is None else left

    def remaining(self) -> int:
        """How many new candidates the next generation may evaluate."""
        return min(self.measurements_left(), self.decisions_left())

    def warm_start_share(self, share: float) -> int:
        """How many warm-start configurations to measure: ``share`` of the budget
        (``WARM_START_SHARE`` unless a problem set says more), at least one."""
        if self.limit is None:
            return WARM_START_MAX
        return min(max(1, int(self.limit * share)), self.limit - self.asked)

    def eta(self, elapsed: float, session_evals: int) -> float | None:
        """Seconds left at this session's rate, or to the time budget, whichever is less."""
        eta = None
        if session_evals and self.limit is not None:
            eta = elapsed / session_evals * max(0, self.limit - self.asked)
        if self.time_s is not None:
            left = max(0.0, self.time_s - elapsed)
            eta = left if eta is None else min(eta, left)
        return eta

    def improved(self, score: float | None) -> bool:
        """Is ``score`` (to minimise) better than the best so far, beyond rounding?"""
        if score is None:
            return False
        if self.best_score is None or score < self.best_score - IMPROVEMENT_EPS * max(
            1.0, abs(self.best_score)
        ):
            self.best_score = score
            return True
        return False

    def end_generation(self, score: float | None) -> bool:
        """Count a generation for patience; True when it improved the score."""
        improved = self.improved(score)
        self.stale_generations = 0 if improved else self.stale_generations + 1
        return improved


__all__ = ["IMPROVEMENT_EPS", "MAX_BATCH", "WARM_START_MAX", "WARM_START_SHARE", "Budget"]
