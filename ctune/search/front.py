"""The running front of a search: its feasible non-dominated trials, and the score.

Progress is reported after every trial, so the front is kept up to date one trial at
a time: recomputing it over every trial after every trial would be quadratic. The
score is what patience watches: the best value for one objective, the hypervolume
(baseline-normalised) for several.
"""

from __future__ import annotations

from ctune.objective.pareto import dominates
from ctune.records import Trial
from ctune.search.strategy import min_form

#: (score to minimise: best value or -hypervolume, best raw values, front size)
Score = tuple[float | None, tuple[float, ...] | None, int]


class FrontTracker:
    """The feasible non-dominated trials, updated one trial at a time."""

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

    def score(self, baseline: tuple[float, ...] | None) -> Score:
        """(score to minimise: best value or -hypervolume, best values, front size)."""
        size = len(self.members)
        if len(self.directions) == 1:
            best = self.best()
            if best is None:
                return None, None, 0
            point = min_form(best, self.directions)
            assert point is not None
            return point[0], best.values, size
        hv = self.hypervolume(baseline)
        return (None if hv is None else -hv), None, size


__all__ = ["FrontTracker", "Score"]
